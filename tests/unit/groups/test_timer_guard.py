"""A group timer that fails runs alone: its group and the timers are put back, it is
logged and retried after a backoff (100 ms, doubling), dropped after five failures in a
row, and every other timer fires as usual. A handler whose records cannot be encoded
fails alone with nothing changed; so does a change of topics that throws."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from kafkacoord.codecs import CodecError
from kafkacoord.codecs.models import GroupMetadataKey, OffsetCommitKey
from kafkacoord.coordinator.groups.classic_group import GroupSnapshot
from kafkacoord.coordinator.groups.records import offset_commit_record, offset_commit_value
from kafkacoord.coordinator.groups.scheduling import EXPIRATION_TIMER, heartbeat_timer
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record, Result

from .consumerdriver import REBALANCE as CONSUMER_REBALANCE
from .consumerdriver import Consumer, consumer_group, state_of, topics_image
from .groupdriver import SESSION, Driver, Member, commit_body, join_body, partition_errors

# A failing timer is tried again after these delays, then dropped at its fifth failure.
BACKOFFS = [100, 200, 400, 800]

Expire = Callable[[str, str, int], Result]


def member_ids(d: Driver, group: str) -> set[str]:
    return {m.member_id for m in d.snapshot(group).members}


def unencodable(group: str = "poison") -> Record:
    """A commit whose leader epoch no Avro int holds."""
    value = offset_commit_value(1, 2**31, "", 0, -1)
    return offset_commit_record(group, "t", 0, value)


class Scene:
    """Group "g" (members a, b) and group "h" (member c): a's and c's sessions run out at
    ``due``, b's well after every retry."""

    def __init__(self, *, c_first: bool = False) -> None:
        self.d = d = Driver()
        self.a, self.b = d.form_group("g", 2)
        [self.c] = d.form_group("h", 1)
        beats = [("h", self.c), ("g", self.a)] if c_first else [("g", self.a), ("h", self.c)]
        for group, member in beats:
            self.beat(group, member)
        self.due = d.now + SESSION
        d.advance(5_000)
        self.beat("g", self.b)
        self.key_a = heartbeat_timer("g", self.a.member_id)
        self.key_b = heartbeat_timer("g", self.b.member_id)
        self.key_c = heartbeat_timer("h", self.c.member_id)
        self.calls = 0

    def beat(self, group: str, member: Member) -> None:
        body = api.Heartbeat(
            group_id=group, generation_id=member.generation, member_id=member.member_id
        )
        assert self.d.call(body).error is ErrorCode.NONE

    def g(self) -> GroupSnapshot:
        return self.d.snapshot("g")

    def other_timers(self) -> dict[Hashable, int]:
        timers = self.d.shard._timers.snapshot()
        timers.pop(self.key_a, None)
        return timers

    def fail_a(self, monkeypatch: pytest.MonkeyPatch, how: Callable[[Result], Result]) -> None:
        """a's session expiry runs (changing its group), then ``how`` spoils its result."""
        membership = self.d.shard._membership
        original: Expire = membership.expire_heartbeat

        def expire(group_id: str, member_id: str, now: int) -> Result:
            result = original(group_id, member_id, now)
            if (group_id, member_id) != ("g", self.a.member_id):
                return result
            self.calls += 1
            assert self.d.shard.group("g") is not None
            assert self.a.member_id not in self.d.shard.group("g").members  # type: ignore[union-attr]
            return how(result)

        monkeypatch.setattr(membership, "expire_heartbeat", expire)


def throw(result: Result) -> Result:
    raise RuntimeError("injected timer failure")


def poison(result: Result) -> Result:
    result.records.append(unencodable())
    return result


@pytest.mark.parametrize("c_first", [False, True], ids=["failing-first", "failing-last"])
def test_a_throwing_timer_is_put_back_retried_with_backoff_then_dropped(
    c_first: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scene(c_first=c_first)
    d = s.d
    before = s.g()
    assert d.shard.timer_deadline(s.key_a) == s.due == d.shard.timer_deadline(s.key_c)
    b_deadline = d.shard.timer_deadline(s.key_b)
    assert b_deadline is not None and b_deadline > s.due + sum(BACKOFFS)
    s.fail_a(monkeypatch, throw)

    with caplog.at_level(logging.ERROR):
        fired = d.advance_to(s.due)
    assert s.calls == 1
    # The failing timer's group is exactly as before, and it comes back in 100 ms.
    assert s.g() == before
    assert d.shard.timer_deadline(s.key_a) == s.due + 100
    assert d.shard.timer_deadline(s.key_b) == b_deadline
    # The other group's timer, due at the same instant, fired as usual.
    h = d.shard.group("h")
    assert h is not None and s.c.member_id not in h.members
    assert d.shard.timer_deadline(s.key_c) is None
    assert fired.records, "h's expiry wrote nothing"
    assert {r.key.group for r in fired.records} == {"h"}  # type: ignore[attr-defined]
    assert any("failed; retrying in 100 ms" in r.getMessage() for r in caplog.records)

    # Each retry fails again: 200, 400, 800 ms later, the group still as before.
    now = s.due + 100
    for attempt, backoff in enumerate(BACKOFFS[1:], start=2):
        others = s.other_timers()
        fired = d.advance_to(now)
        assert s.calls == attempt
        assert fired.records == []
        assert s.g() == before
        assert s.other_timers() == others
        now += backoff
        assert d.shard.timer_deadline(s.key_a) == now

    # The fifth failure in a row drops it.
    logged = len(caplog.records)
    with caplog.at_level(logging.ERROR):
        fired = d.advance_to(now)
    assert s.calls == 5
    assert fired.records == []
    assert d.shard.timer_deadline(s.key_a) is None
    assert s.g() == before
    assert any("dropped" in r.getMessage() for r in caplog.records[logged:])
    d.advance(60_000)  # nothing brings it back
    assert s.calls == 5

    # The shard serves on.
    reply = d.call(commit_body("other", {("t", 0): 7}))
    assert partition_errors(reply) == {("t", 0): ErrorCode.NONE}
    assert d.shard.committed_offsets("other")[("t", 0)].offset == 7


def test_a_retry_that_succeeds_does_what_the_timer_would_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = Scene()
    d = s.d
    before = s.g()
    with monkeypatch.context() as patch:
        s.fail_a(patch, throw)
        d.advance_to(s.due)
        d.advance_to(s.due + 100)
    assert s.calls == 2 and s.g() == before
    assert d.shard.timer_deadline(s.key_a) == s.due + 300
    d.advance_to(s.due + 300)
    assert s.a.member_id not in member_ids(d, "g")
    assert d.state("g") is GroupState.PREPARING_REBALANCE
    assert d.shard.timer_deadline(s.key_a) is None
    assert s.calls == 2


def test_a_timer_whose_record_cannot_be_encoded_is_put_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scene()
    d = s.d
    before, log_size = s.g(), len(d.log)
    with monkeypatch.context() as patch:
        s.fail_a(patch, poison)
        with caplog.at_level(logging.ERROR):
            fired = d.advance_to(s.due)
        assert s.calls == 1
        assert s.g() == before
        assert d.shard.timer_deadline(s.key_a) == s.due + 100
        # Nothing of the failed timer reached the log; h's expiry did.
        assert fired.records
        assert all(
            isinstance(r.key, GroupMetadataKey) and r.key.group == "h" for r in fired.records
        )
        assert all(r.raw is not None for r in fired.records)
        assert not any(isinstance(r.key, OffsetCommitKey) for r in d.log[log_size:])
        assert any("CodecError" in r.getMessage() for r in caplog.records)
        d.advance_to(s.due + 100)
        assert s.calls == 2 and s.g() == before
    # Healed: the next retry expires a as the first run would have.
    d.advance_to(s.due + 300)
    assert s.a.member_id not in member_ids(d, "g")


@pytest.mark.sources
def test_a_success_resets_the_failure_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The periodic offsets expiration fails four times, succeeds, then fails four times
    again: never dropped, as the success cleared its count."""
    d = Driver()
    shard = d.shard
    offsets = shard._offsets
    original = offsets.expire
    failing = [True]
    calls = [0]

    def expire(now: int) -> Result:
        calls[0] += 1
        if failing[0]:
            raise RuntimeError("injected")
        return original(now)

    monkeypatch.setattr(offsets, "expire", expire)
    interval = d.config.offsets_retention_check_interval_ms
    due = shard.timer_deadline(EXPIRATION_TIMER)
    assert due is not None
    for backoff in BACKOFFS:
        d.advance_to(due)
        due += backoff
        assert shard.timer_deadline(EXPIRATION_TIMER) == due
    failing[0] = False
    d.advance_to(due)
    due += interval
    assert shard.timer_deadline(EXPIRATION_TIMER) == due
    failing[0] = True
    for backoff in BACKOFFS:
        d.advance_to(due)
        due += backoff
        assert shard.timer_deadline(EXPIRATION_TIMER) == due, "dropped too early"
    d.advance_to(due)
    assert shard.timer_deadline(EXPIRATION_TIMER) is None
    assert calls[0] == 10


def test_a_failed_timer_does_not_lose_a_sibling_it_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """a's and b's sessions run out at the same instant; a's expiry reschedules b's
    timer, then fails. Putting a's changes back must leave b's expiry as it was: it
    fires (b leaves), or at the least stays scheduled."""
    d = Driver()
    a, b = d.form_group("g", 2)
    for m in (a, b):
        d.call(api.Heartbeat(group_id="g", generation_id=m.generation, member_id=m.member_id))
    due = d.now + SESSION
    key_b = heartbeat_timer("g", b.member_id)
    assert d.shard.timer_deadline(heartbeat_timer("g", a.member_id)) == due
    assert d.shard.timer_deadline(key_b) == due
    membership = d.shard._membership
    original: Expire = membership.expire_heartbeat

    def expire(group_id: str, member_id: str, now: int) -> Result:
        if member_id == a.member_id:
            d.shard._timers.schedule(key_b, now + 5_000)  # e.g. a join completing
            raise RuntimeError("injected")
        return original(group_id, member_id, now)

    monkeypatch.setattr(membership, "expire_heartbeat", expire)
    d.advance_to(due)
    group = d.shard.group("g")
    assert group is not None
    assert b.member_id not in group.members or d.shard.timer_deadline(key_b) is not None, (
        "b's session timer was popped, skipped as 'touched' by the failed timer, and not "
        "put back: b's session can never expire"
    )


def test_a_consumer_group_rebalance_timeout_that_fails_once_still_fences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KIP-848: a member that never revokes is fenced at its rebalance timeout; a failure
    of that timer is retried 100 ms later and must still fence it."""
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    a, b = Consumer(d, "G", "a"), Consumer(d, "G", "b")
    a.ok()
    b.ok()
    a.ok()  # asked to revoke; it never does
    consumers = d.shard._consumer
    calls = [0]

    def fence(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        raise RuntimeError("injected")

    with monkeypatch.context() as patch:
        patch.setattr(consumers, "fence_member", fence)
        d.advance(CONSUMER_REBALANCE - 1)
        b.ok()
        before = state_of(consumer_group(d, "G"))
        d.advance(1)
    assert calls[0] == 1
    assert state_of(consumer_group(d, "G")) == before
    d.advance(100)  # the retry, without the failure
    assert set(consumer_group(d, "G").members) == {"b"}, (
        "the retried rebalance timeout did nothing: the failed run's pop of the member's "
        "rebalance epoch was not put back"
    )


# -- handle: records that cannot be encoded -------------------------------------------------------


def bad_commit(group: str) -> api.OffsetCommit:
    """An OffsetCommit pydantic would refuse (leader epoch past int32), built as is."""
    good = api.CommitPartition.model_construct(partition=0, offset=99, leader_epoch=5,
                                               metadata="")  # fmt: skip
    bad = api.CommitPartition.model_construct(partition=1, offset=99, leader_epoch=2**31,
                                              metadata="")  # fmt: skip
    topic = api.CommitTopic.model_construct(name="t", partitions=[good, bad])
    return api.OffsetCommit.model_construct(
        group_id=group, generation_id=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[topic],
    )  # fmt: skip


def test_an_offset_commit_that_cannot_be_encoded_commits_nothing() -> None:
    d = Driver()
    reply = d.call(commit_body("g", {("t", 0): 1, ("t", 1): 2}))
    assert partition_errors(reply) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    before, log_size, replies = d.shard.committed_offsets("g"), len(d.log), len(d.replies)
    with pytest.raises(CodecError):
        d.request(bad_commit("g"))
    assert d.shard.committed_offsets("g") == before  # not even the good partition
    assert len(d.log) == log_size and len(d.replies) == replies
    # A commit to a group that had none creates nothing either.
    with pytest.raises(CodecError):
        d.request(bad_commit("fresh"))
    assert d.shard.committed_offsets("fresh") == {}
    assert d.shard.group("fresh") is None
    # The shard serves on.
    reply = d.call(commit_body("g", {("t", 1): 3}))
    assert partition_errors(reply) == {("t", 1): ErrorCode.NONE}
    assert d.shard.committed_offsets("g")[("t", 1)].offset == 3


def test_a_join_whose_records_cannot_be_encoded_leaves_the_group_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed, clean = Driver(), Driver()
    for d in (failed, clean):
        d.form_group("g", 2)
    newcomer = [d.new_member_id("g") for d in (failed, clean)]
    assert newcomer[0] == newcomer[1]
    shard = failed.shard
    before = (shard.describe_group("g"), shard._timers.snapshot(), len(failed.log))
    membership = shard._membership
    original = membership.join_group
    calls = [0]

    def join(*args: Any) -> Result:
        calls[0] += 1
        result: Result = original(*args)
        assert shard.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
        result.records.append(unencodable())
        return result

    with monkeypatch.context() as patch:
        patch.setattr(membership, "join_group", join)
        with pytest.raises(CodecError):
            failed.request(join_body("g", newcomer[0]))
    assert calls[0] == 1
    assert (shard.describe_group("g"), shard._timers.snapshot(), len(failed.log)) == before
    # The same join then goes as on a shard that never failed.
    refs = [d.request(join_body("g", newcomer[0])) for d in (failed, clean)]
    assert failed.reply(refs[0]) == clean.reply(refs[1])
    assert failed.snapshot("g") == clean.snapshot("g")
    assert failed.shard._timers.snapshot() == clean.shard._timers.snapshot()


# -- on_topics ------------------------------------------------------------------------------------


def consumer_scene() -> Driver:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    a, b = Consumer(d, "G", "a"), Consumer(d, "G", "b")
    a.ok()
    b.ok()
    a.ok()
    b.ok()
    return d


def test_on_topics_that_throws_puts_the_topics_and_timers_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed, clean = consumer_scene(), consumer_scene()
    consumers = failed.shard._consumer
    known, was_known = dict(consumers.topics), consumers.topics_known
    timers = failed.shard._timers.snapshot()
    group_before = state_of(consumer_group(failed, "G"))
    assert known == topics_image(t=4) and was_known

    def plan_for(group: Any) -> Any:
        raise RuntimeError("injected")

    with monkeypatch.context() as patch:
        patch.setattr(consumers, "plan_for", plan_for)
        with pytest.raises(RuntimeError):
            failed.shard.on_topics(topics_image(t=6), failed.now)
    assert consumers.topics == known
    assert consumers.topics_known is was_known
    assert failed.shard._timers.snapshot() == timers
    assert state_of(consumer_group(failed, "G")) == group_before
    # The runtime's retry sees the change again: the same records as on a clean shard.
    retried = failed.apply(failed.shard.on_topics(topics_image(t=6), failed.now))
    expected = clean.apply(clean.shard.on_topics(topics_image(t=6), clean.now))
    assert retried.records, "the new partitions went unnoticed"
    assert retried.records == expected.records
    assert state_of(consumer_group(failed, "G")) == state_of(consumer_group(clean, "G"))


def test_on_topics_whose_records_cannot_be_encoded_puts_the_topics_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = consumer_scene()
    consumers = d.shard._consumer
    known = dict(consumers.topics)
    original = consumers.on_topics

    def on_topics(topics: Any, now: int) -> Result:
        result: Result = original(topics, now)
        assert result.records
        result.records.append(unencodable())
        return result

    with monkeypatch.context() as patch:
        patch.setattr(consumers, "on_topics", on_topics)
        with pytest.raises(CodecError):
            d.shard.on_topics(topics_image(t=6), d.now)
    assert consumers.topics == known
    assert d.apply(d.shard.on_topics(topics_image(t=6), d.now)).records
