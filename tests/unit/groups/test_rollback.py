"""A request that fails is undone from the shard's undo log, whatever its type: the timer
deadlines it moved, the classic group it changed and the consumer members' soft state
are exactly as before it, and the shard serves on as if it had never run. Successful
requests keep their changes, and the steady traffic (commits, heartbeats) copies no
group."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkacoord.coordinator.groups.classic_group import ClassicGroup
from kafkacoord.coordinator.groups.consumer.coordinator import rebalance_timer, session_timer
from kafkacoord.coordinator.groups.scheduling import EXPIRATION_TIMER, heartbeat_timer
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef, replay_result

from .consumerdriver import Consumer, consumer_group, state_of, topics_image
from .groupdriver import SESSION, Driver, Member, commit_body, join_body, leader_assignment

G = "g"


class InjectedError(RuntimeError):
    pass


# --------------------------------------------------------------------------- helpers


def classic_state(group: ClassicGroup) -> dict[str, object]:
    """Every field of a classic group, copied; members field by field (they compare by
    identity)."""
    fields = copy.deepcopy(vars(group))
    fields["members"] = {
        member_id: tuple(getattr(m, f.name) for f in dataclasses.fields(m))
        for member_id, m in group.members.items()
    }
    return fields


def soft_state(d: Driver) -> dict[str, object]:
    """Everything a handler may change in memory, and what reached the log and clients."""
    shard = d.shard
    consumers = shard._consumer
    return {
        "timers": shard._timers.snapshot(),
        "groups": {g: classic_state(group) for g, group in sorted(shard._groups.items())},
        "consumer_groups": {g: state_of(c) for g, c in sorted(consumers.groups.items())},
        "rebalance_epochs": dict(consumers._rebalance_epochs),
        "last_heard": dict(consumers._last_heard),
        "offsets": shard.offsets_snapshot(),
        "log": len(d.log),
        "replies": len(d.replies),
    }


@contextmanager
def failing_after(owner: object, name: str) -> Iterator[list[int]]:
    """``owner.name`` does all its work, then raises: the worst moment to fail."""
    original: Callable[..., Any] = getattr(owner, name)
    calls = [0]

    def run(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        original(*args, **kwargs)
        raise InjectedError(f"{name} failed after its changes")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, name, run)
        yield calls


def skip_request(d: Driver) -> None:
    """Use up the correlation id a failed request took on the other driver, so that
    parked requests compare equal."""
    d.request(api.ListGroups())
    d.replies.pop()


def heartbeat(member: Member, group: str = G) -> api.Heartbeat:
    return api.Heartbeat(
        group_id=group, generation_id=member.generation, member_id=member.member_id
    )


def stable_group(n: int = 3) -> tuple[Driver, list[Member]]:
    d = Driver()
    members = d.form_group(G, n)
    d.advance(1_000)
    for m in members:
        assert d.call(heartbeat(m)).error is ErrorCode.NONE
    d.advance(1_000)
    return d, members


def joined(d: Driver, n: int) -> list[api.JoinGroupResponse]:
    """n members joined; the group is CompletingRebalance, waiting for their SyncGroups."""
    ids = [d.new_member_id(G) for _ in range(n)]
    refs = [d.request(join_body(G, member_id)) for member_id in ids]
    d.advance(d.config.initial_rebalance_delay_ms * (n + 1))
    return [d.join_response(ref) for ref in refs]


def sync_body(
    response: api.JoinGroupResponse, assignments: list[api.SyncAssignment]
) -> api.SyncGroup:
    return api.SyncGroup(
        group_id=G,
        generation_id=response.generation_id,
        member_id=response.member_id,
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignments=assignments,
    )


def consumer_scene() -> tuple[Driver, Consumer, Consumer]:
    """Consumer group G: a owns partitions, b has just joined, so a must revoke some."""
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    d.advance(1_000)
    b.ok()
    d.advance(1_000)
    return d, a, b


# --------------------------------------------------------------------------- ConsumerGroupHeartbeat


def test_a_consumer_heartbeat_that_fails_after_resetting_timers_leaves_no_trace() -> None:
    """a's heartbeat restarts its session, moves it to revoking (a rebalance timeout and
    its epoch), notes where it was heard, then fails: all of it is put back."""
    failed, a, _ = consumer_scene()
    clean, a2, _ = consumer_scene()
    before = soft_state(failed)
    session = session_timer(G, "a")
    assert session in before["timers"]  # type: ignore[operator]

    with failing_after(failed.shard._consumer, "hints_for") as calls, pytest.raises(InjectedError):
        a.heartbeat()
    assert calls[0] == 1, "the failure was never reached"
    assert soft_state(failed) == before
    skip_request(clean)

    # Served on: the same heartbeat does what it does on a shard that never failed.
    assert a.ok() == a2.ok()
    after = soft_state(failed)
    assert after == soft_state(clean)
    # What the failed run had changed, and put back.
    assert after["timers"][session] == failed.now + 45_000  # type: ignore[index]
    assert rebalance_timer(G, "a") in after["timers"]  # type: ignore[operator]
    for soft in ("rebalance_epochs", "last_heard"):
        assert after[soft] != before[soft], soft


def test_an_upgrade_refused_after_touching_sessions_leaves_no_timers() -> None:
    """A consumer-protocol member takes a static member's instance id in a Stable classic
    group: the conversion has started each classic member's session when the instance id
    turns out to be held (UNRELEASED_INSTANCE_ID). The classic group keeps its timers."""
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=3), d.now))
    d.form_group(G, 2, instances=["i1", "i2"])
    d.advance(1_000)
    before = soft_state(d)
    reply = Consumer(d, G, "newcomer", instance="i1").heartbeat()
    assert reply.error is ErrorCode.UNRELEASED_INSTANCE_ID
    after = soft_state(d)
    assert after.pop("replies") == before.pop("replies") + 1  # type: ignore[operator]
    assert after == before
    assert not any(k[0] == "cg-session" for k in d.shard._timers.snapshot())  # type: ignore[index]
    assert d.state(G) is GroupState.STABLE


# --------------------------------------------------------------------------- classic requests


def test_a_join_that_fails_after_its_changes_leaves_no_trace() -> None:
    failed, _ = stable_group()
    clean, _ = stable_group()
    newcomer = [d.new_member_id(G) for d in (failed, clean)]
    assert newcomer[0] == newcomer[1]
    before = soft_state(failed)
    group = failed.shard.group(G)

    with (
        failing_after(failed.shard._membership, "join_group") as calls,
        pytest.raises(InjectedError),
    ):
        failed.request(join_body(G, newcomer[0]))
    assert calls[0] == 1
    assert soft_state(failed) == before
    assert failed.shard.group(G) is group, "a post-commit action may hold the group"
    skip_request(clean)

    refs = [d.request(join_body(G, newcomer[0])) for d in (failed, clean)]
    assert failed.state(G) is GroupState.PREPARING_REBALANCE
    assert failed.reply(refs[0]) == clean.reply(refs[1])
    assert soft_state(failed) == soft_state(clean)


def test_a_first_join_that_fails_after_creating_its_group_leaves_none() -> None:
    d = Driver()
    before = soft_state(d)
    with failing_after(d.shard._membership, "join_group"), pytest.raises(InjectedError):
        d.request(join_body("fresh"))
    assert soft_state(d) == before
    assert d.shard.group("fresh") is None


def test_a_sync_that_fails_after_its_changes_leaves_no_trace() -> None:
    """The leader's SyncGroup answers the parked follower, restarts sessions, cancels the
    pending-sync timeout and sets the group's snapshot, then fails."""
    failed, clean = Driver(), Driver()
    responses = [joined(d, 2) for d in (failed, clean)]
    followers = [next(r for r in rs if r.member_id != r.leader) for rs in responses]
    leaders = [next(r for r in rs if r.member_id == r.leader) for rs in responses]
    parked = [d.request(sync_body(f, [])) for d, f in zip((failed, clean), followers, strict=True)]
    assert failed.reply(parked[0]) is None
    plan = leader_assignment(leaders[0], {"t": 4}, "range")
    before = soft_state(failed)
    assert failed.state(G) is GroupState.COMPLETING_REBALANCE

    with (
        failing_after(failed.shard._membership, "sync_group") as calls,
        pytest.raises(InjectedError),
    ):
        failed.request(sync_body(leaders[0], plan))
    assert calls[0] == 1
    assert soft_state(failed) == before
    assert failed.reply(parked[0]) is None
    skip_request(clean)

    refs = [d.request(sync_body(r, plan)) for d, r in zip((failed, clean), leaders, strict=True)]
    assert failed.state(G) is GroupState.STABLE
    assert failed.reply(refs[0]) == clean.reply(refs[1])
    assert failed.sync_response(parked[0]) == clean.sync_response(parked[1])
    assert soft_state(failed) == soft_state(clean)


def test_a_leave_that_fails_after_its_changes_leaves_no_trace() -> None:
    failed, members = stable_group()
    clean, _ = stable_group()
    leaving = api.LeaveGroup(
        group_id=G, members=[api.MemberIdentity(member_id=members[1].member_id)]
    )
    before = soft_state(failed)

    with (
        failing_after(failed.shard._membership, "leave_group") as calls,
        pytest.raises(InjectedError),
    ):
        failed.request(leaving)
    assert calls[0] == 1
    assert soft_state(failed) == before
    assert failed.state(G) is GroupState.STABLE
    skip_request(clean)

    assert failed.call(leaving) == clean.call(leaving)
    assert failed.state(G) is GroupState.PREPARING_REBALANCE
    assert soft_state(failed) == soft_state(clean)


def test_a_heartbeat_that_fails_after_resetting_its_session_puts_it_back() -> None:
    d, members = stable_group()
    key = heartbeat_timer(G, members[0].member_id)
    before = soft_state(d)
    deadline = d.shard.timer_deadline(key)
    with failing_after(d.shard._membership, "heartbeat"), pytest.raises(InjectedError):
        d.request(heartbeat(members[0]))
    assert soft_state(d) == before
    assert d.shard.timer_deadline(key) == deadline
    assert d.call(heartbeat(members[0])).error is ErrorCode.NONE
    assert d.shard.timer_deadline(key) == d.now + SESSION


def test_a_failed_join_keeps_the_group_a_pending_sync_action_completes() -> None:
    """The leader's snapshot is appended, not yet acknowledged; meanwhile a join to the
    same group fails. Once the append lands the group still becomes Stable and the
    follower parked meanwhile gets its assignment: the failure put the group back in
    place, not as a copy the post-commit action would not recognise."""
    d = Driver()
    responses = joined(d, 2)
    leader = next(r for r in responses if r.member_id == r.leader)
    follower = next(r for r in responses if r.member_id != r.leader)
    plan = leader_assignment(leader, {"t": 4}, "range")
    sync = Request(RequestRef("client", 10_001), "SyncGroup", sync_body(leader, plan))
    pending = replay_result(d.shard, d.shard.handle(sync, d.now))
    assert pending.actions and d.state(G) is GroupState.COMPLETING_REBALANCE
    parked = d.request(sync_body(follower, []))
    assert d.reply(parked) is None

    with failing_after(d.shard._membership, "join_group"), pytest.raises(InjectedError):
        d.request(join_body(G, follower.member_id))

    d.replies.extend(pending.committed())  # the append is acknowledged
    assert d.state(G) is GroupState.STABLE
    assert d.sync_response(parked).assignment != b""


# --------------------------------------------------------------------------- timers


@pytest.mark.sources
def test_an_offset_expiry_that_fails_puts_back_the_group_it_forgot() -> None:
    """A group that was never durable (its only member never came back after
    MEMBER_ID_REQUIRED) is forgotten by the offsets expiry; a failure later in the same
    expiry brings it back, and the retry forgets it again."""
    d = Driver()
    d.new_member_id(G)
    d.advance(SESSION)  # the pending member's session runs out
    group = d.shard.group(G)
    assert group is not None and group.is_empty and group.persisted is None
    due = d.shard.timer_deadline(EXPIRATION_TIMER)
    assert due is not None

    with failing_after(d.shard._offsets, "expire") as calls:
        d.advance_to(due)
    assert calls[0] == 1
    assert d.shard.group(G) is group
    d.advance(100)  # the retry
    assert d.shard.group(G) is None


# --------------------------------------------------------------------------- success


def test_successful_requests_keep_their_changes() -> None:
    """Each request type succeeds as before, and the next request's failure undoes only
    its own changes: an earlier request's are kept."""
    d, members = stable_group()
    key = heartbeat_timer(G, members[0].member_id)
    assert d.call(heartbeat(members[0])).error is ErrorCode.NONE
    assert d.shard.timer_deadline(key) == d.now + SESSION
    beaten = soft_state(d)
    assert not d.shard._undo.open

    d.advance(500)
    with failing_after(d.shard._membership, "heartbeat"), pytest.raises(InjectedError):
        d.request(heartbeat(members[0]))
    assert soft_state(d) == beaten  # the earlier heartbeat's deadline stays

    commit = commit_body(G, {("t", 0): 5}, member_id=members[0].member_id,
                         generation=members[0].generation)  # fmt: skip
    assert d.call(commit).error is ErrorCode.NONE
    assert d.shard.committed_offsets(G)[("t", 0)].offset == 5
    leaving = api.LeaveGroup(
        group_id=G, members=[api.MemberIdentity(member_id=members[2].member_id)]
    )
    assert d.call(leaving).error is ErrorCode.NONE
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert not d.shard._undo.open


def test_commits_and_heartbeats_copy_no_group(monkeypatch: pytest.MonkeyPatch) -> None:
    d, members = stable_group()
    cd, a, _ = consumer_scene()
    saved = [0]
    original = ClassicGroup.save

    def save(group: ClassicGroup) -> ClassicGroup:
        saved[0] += 1
        return original(group)

    monkeypatch.setattr(ClassicGroup, "save", save)
    commit = commit_body(G, {("t", 0): 5}, member_id=members[0].member_id,
                         generation=members[0].generation)  # fmt: skip
    assert d.call(commit).error is ErrorCode.NONE
    assert d.call(heartbeat(members[0])).error is ErrorCode.NONE
    a.ok()
    assert cd.call(commit_body(G, {("t", 0): 1}, member_id="a", generation=a.epoch)).error is (
        ErrorCode.NONE
    )
    assert saved[0] == 0
    # A join does save its group: the count is live.
    d.request(join_body(G, members[0].member_id))
    assert saved[0] == 1
    assert consumer_group(cd, G).members["a"].member_epoch == a.epoch
