"""A group as of an instant (client.group_history.fold_group): the records a driven shard
wrote, each stamped with the fake clock when written and through the real codec, folded
up to an instant (no I/O)."""

from __future__ import annotations

from kafkacoord.client.group_history import GroupAsOf, fold_group
from kafkacoord.client.metadata_history import HistoryUnavailableError, Window
from kafkacoord.codecs import RecordType, decode_record, encode_key, encode_record
from kafkacoord.codecs.models import GroupMetadataKey, OffsetCommitKey, ShardLeaderKey
from kafkacoord.codecs.records import group_key_filter
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.storage.log_history import LoggedRecord, LogRead

from .consumerdriver import Consumer, converge, topics_image
from .groupdriver import Driver, commit_body, join_body

G = "readers"


class TimedLog:
    """The driver's log as a broker holds it: each record with its offset and the time
    it was appended."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.records: list[LoggedRecord] = []

    def take(self) -> int:
        """Stamp what the driver appended since the last call; the time now."""
        for record in self.driver.log[len(self.records) :]:
            key, value = decode_record(*encode_record(record.key, record.value))
            self.records.append(LoggedRecord(len(self.records), self.driver.now, key, value))
        return self.driver.now

    def as_of(self, instant_ms: int, group: str = G) -> GroupAsOf:
        kept = [r for r in self.records if r.timestamp_ms <= instant_ms]
        return fold_group(group, 0, kept, instant_ms)


def offsets(past: GroupAsOf) -> dict[tuple[str, int], int]:
    return {tp: fetched.offset for tp, fetched in past.committed(G).items()}


def test_a_classic_group_as_of_each_instant_has_its_offsets_and_members_then() -> None:
    d = Driver()
    log = TimedLog(d)
    [first] = d.form_group(G, 1, partitions={"t": 2})
    d.call(commit_body(G, {("t", 0): 3, ("t", 1): 1}, member_id=first.member_id,
                       generation=first.generation))  # fmt: skip
    d.call(commit_body("other", {("t", 0): 99}))  # another group on the same shard
    t1 = log.take()
    d.advance(1_000)
    d.call(commit_body(G, {("t", 0): 8}, member_id=first.member_id,
                       generation=first.generation))  # fmt: skip
    d.call(join_body(G))  # a second member: MEMBER_ID_REQUIRED, then a rebalance
    d.advance(5_000)
    t2 = log.take()

    then = log.as_of(t1)
    assert offsets(then) == {("t", 0): 3, ("t", 1): 1}
    [described] = then.describe_groups([G])
    assert (described.error, described.state, described.generation) == (
        ErrorCode.NONE, "Stable", first.generation)  # fmt: skip
    assert [m.member_id for m in described.members] == [first.member_id]
    assert described.protocol == "range" and described.leader == first.member_id
    [consumer] = then.describe_consumer_groups([G])
    assert consumer.error is ErrorCode.GROUP_ID_NOT_FOUND

    assert offsets(log.as_of(t2)) == {("t", 0): 8, ("t", 1): 1}
    assert offsets(log.as_of(t2, "other")) == {("t", 0): 99}  # each group its own
    assert log.as_of(t1 - 1).describe_groups([G])[0].error is ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_tombstones_and_a_deleted_group_are_gone_after_they_were_written() -> None:
    d = Driver()
    log = TimedLog(d)
    d.call(commit_body(G, {("t", 0): 5, ("t", 1): 6}))  # a simple (memberless) group
    t1 = log.take()
    d.advance(1_000)
    d.call(api.OffsetDelete(group_id=G, topics=[api.FetchTopic(name="t", partitions=[1])]))
    t2 = log.take()
    d.advance(1_000)
    d.call(api.DeleteGroups(groups=[G]))
    t3 = log.take()

    assert offsets(log.as_of(t1)) == {("t", 0): 5, ("t", 1): 6}
    assert offsets(log.as_of(t2)) == {("t", 0): 5}
    assert offsets(log.as_of(t3)) == {}


def test_a_consumer_group_as_of_an_instant_has_its_epochs_members_and_assignments_then() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    log = TimedLog(d)
    a = Consumer(d, G, "a")
    converge([a])
    t1 = log.take()
    d.advance(1_000)
    b = Consumer(d, G, "b")
    converge([a, b])
    t2 = log.take()

    [then] = log.as_of(t1).describe_consumer_groups([G])
    assert then.error is ErrorCode.NONE and then.group_epoch == 1
    [member] = then.members
    assert member.member_id == "a"
    assert {(x.topic, p) for x in member.assignment for p in x.partitions} == {
        ("t", p) for p in range(4)}  # fmt: skip
    [now] = log.as_of(t2).describe_consumer_groups([G])
    assert now.group_epoch == 2 and [m.member_id for m in now.members] == ["a", "b"]
    owned = [{(x.topic, p) for x in m.assignment for p in x.partitions} for m in now.members]
    assert len(owned[0]) == len(owned[1]) == 2
    # DescribeGroups' shape, as GroupAdmin gives it for a consumer group.
    [classic] = log.as_of(t1).describe_groups([G])
    assert (classic.state, classic.generation, len(classic.members)) == ("Stable", 1, 1)


def test_the_key_filter_keeps_only_the_groups_records() -> None:
    wants = group_key_filter(G)
    assert wants(encode_key(GroupMetadataKey(G)))
    assert wants(encode_key(OffsetCommitKey(G, "t", 0)))
    assert not wants(encode_key(OffsetCommitKey(G + "x", "t", 0)))  # a longer id
    assert not wants(encode_key(OffsetCommitKey(G[:-1], "t", 0)))  # a shorter one
    assert not wants(encode_key(ShardLeaderKey()))
    assert not wants(b"")
    # Any key version: the header's second byte is not part of the match.
    old = bytearray(encode_key(GroupMetadataKey(G)))
    old[1] ^= 0x7F
    assert wants(bytes(old))


def test_the_key_filter_keeps_only_the_types_asked_for() -> None:
    wants = group_key_filter(G, (RecordType.GROUP_METADATA,))
    assert wants(encode_key(GroupMetadataKey(G)))
    assert not wants(encode_key(OffsetCommitKey(G, "t", 0)))
    assert not wants(encode_key(GroupMetadataKey(G + "x")))


def test_an_instant_before_the_window_names_the_offsets_topic_and_why_no_warehouse() -> None:
    read = LogRead([], first_timestamp_ms=5_000, next_offset=10, first_offset=4)
    window = Window(60_000, reported=True)
    window.check(50_000, 100_000, read, topic="the offsets topic x")  # inside: no error
    try:
        window.check(10_000, 100_000, read, topic="the offsets topic x", earlier="None here.")
    except HistoryUnavailableError as exc:
        assert "min.compaction.lag.ms of the offsets topic x" in str(exc)
        assert str(exc).endswith("is older. None here.")
    else:
        raise AssertionError("an instant before the window was answered")
