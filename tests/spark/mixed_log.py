"""A log that exercises every rule both sources must apply alike.

On top of the cluster scenario (elections, a reassignment, a controller
failover with a stale write, groups, commits, tombstones, poison), it adds:

- metadata: values in older schema versions (ControllerValue v1, NodeValue v1),
  a later controller failover written in v1, a stale controller record and a
  stale decision after it, and poison that only a strict decoder catches
  (trailing bytes, invalid UTF-8, unknown key and value
  versions, a one-byte value, an empty key, a record type of the other topic);
- offsets, shard 0: a group shard's leadership changing hands with epoch-tagged
  records, a zombie's late commits, tombstone and poison, a stale marker, a
  marker tagged older than the epoch in force, an undecodable marker, and
  untagged records.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Producer

from kafkacoord.codecs import encode_key, encode_record, encode_value
from kafkacoord.codecs.fencing import epoch_headers
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    GroupMetadataKey,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.codecs.records import encode_value_as
from kafkacoord.storage.topics import InternalTopics

from .scenario import USER_PARTITION_SIZES, Scenario, build
from .support import create_topic

Tagged = tuple[int, bytes | None, bytes | None, int | None]  # partition, key, value, epoch tag


@dataclass
class MixedLog:
    scenario: Scenario
    metadata: list[Tagged]
    offsets: list[Tagged]


def _untagged(records: list[tuple[int, bytes | None, bytes | None]]) -> list[Tagged]:
    return [(p, k, v, None) for p, k, v in records]


def _metadata_extras(now: int) -> list[Tagged]:
    node7 = NodeValue(7, "inc7", 1, False, now, 3, rack="r1", endpoints={"x": "h:1"})
    good_topic = encode_value(TopicValue("t7", "id-t7", 1, 1, now, 3))
    records = [
        (ControllerKey(), encode_value_as(ControllerValue(3, 3, "c3", now), 1)),  # v1, epoch 3
        (NodeKey(7), encode_value_as(node7, 1)),  # v1: roles default to []
        (NodeKey(8), encode_value(NodeValue(8, "inc8", 1, False, now, 2))),  # stale decision
        (ControllerKey(), encode_value(ControllerValue(2, 2, "late", now))),  # stale controller
        (TopicKey("t7"), good_topic + b"\x00"),  # trailing byte
        (TopicKey("t8"), _invalid_utf8(now)),
        (TopicKey("t9"), b"\x00\x09" + good_topic[2:]),  # unknown value version
        (TopicKey("t10"), b"\x01"),  # a one-byte value
        (ShardLeaderKey(), encode_value(ShardLeaderValue(1, 1, "n1", now))),  # offsets' type
        (NodeKey(7), None),  # tombstone of a v1 record
        (TopicKey("t7"), good_topic),  # the good record after its poison
    ]
    out: list[Tagged] = [(0, encode_key(k), v, None) for k, v in records]
    out.append((0, b"", b"\x00\x01", None))  # an empty key
    out.append((0, b"\x02\x07\x02", encode_value(node7), None))  # unknown key version
    return out


def _invalid_utf8(now: int) -> bytes:
    """A TopicValue whose name is not UTF-8 (the codecs reject it)."""
    return encode_value(TopicValue("ab", "id-ab", 1, 1, now, 3)).replace(b"ab", b"\xff\xfe", 1)


def bool_of_two(now: int) -> bytes:
    """A NodeValue whose ``fenced`` boolean is the byte 2 (the codecs read True)."""
    value = encode_value(NodeValue(9, "inc9", 1, True, now, 3))
    # The boolean follows node_id, rack, endpoints, incarnation and node_epoch.
    prefix = encode_value(NodeValue(9, "inc9", 1, False, now, 3))
    at = next(i for i, (a, b) in enumerate(zip(value, prefix, strict=True)) if a != b)
    return value[:at] + b"\x02" + value[at + 1 :]


def _marker(epoch: int, tag: int | None) -> Tagged:
    key, value = encode_record(ShardLeaderKey(), ShardLeaderValue(epoch, epoch, f"n{epoch}", 1))
    return 0, key, value, tag


def _commit(user_topic: str, p: int, offset: int, tag: int | None, now: int) -> Tagged:
    key, value = encode_record(OffsetCommitKey("leaders", user_topic, p),
                               OffsetCommitValue(offset, f"m{offset}", now))  # fmt: skip
    return 0, key, value, tag


def _old_commit(user_topic: str, now: int) -> Tagged:
    """A commit in OffsetCommitValue v1 (no leader_epoch), tagged with the current epoch."""
    value = encode_value_as(OffsetCommitValue(3, "v1", now, 4), 1)
    return 0, encode_key(OffsetCommitKey("leaders", user_topic, 4)), value, 2


def _offsets_extras(user_topic: str, now: int) -> list[Tagged]:
    commit_key = encode_key(OffsetCommitKey("leaders", user_topic, 1))
    return [
        _marker(1, 1),
        _commit(user_topic, 0, 5, 1, now),
        _commit(user_topic, 1, 6, 1, now),
        _marker(2, 2),
        _commit(user_topic, 0, 7, 2, now),
        _commit(user_topic, 0, 99, 1, now),  # the zombie's late commit
        (0, commit_key, None, 1),  # its tombstone
        (0, commit_key, b"\x00\x02\xff", 1),  # its poison
        _marker(1, 1),  # a zombie restarting with its old epoch
        _marker(5, 1),  # announces 5 but is tagged older than the epoch in force
        (0, encode_key(ShardLeaderKey()), b"\x00\x01\x02", 2),  # an undecodable marker
        _commit(user_topic, 2, 8, None, now),  # untagged: admitted
        _commit(user_topic, 3, 11, 2, now),
        _old_commit(user_topic, now),
        (0, encode_key(GroupMetadataKey("leaders")), None, 2),  # tombstone of a missing key
        (0, encode_key(NodeKey(1)), encode_value(NodeValue(1, "x", 1, False, 1, 1)), 2),
    ]


def build_mixed(topics: InternalTopics, user_topic: str, now: int) -> MixedLog:
    scenario = build(topics, user_topic, now)
    metadata = _untagged(scenario.metadata) + _metadata_extras(now)
    offsets = _untagged(scenario.offsets) + _offsets_extras(user_topic, now)
    return MixedLog(scenario, metadata, offsets)


def write_mixed(bootstrap: str, log: MixedLog, part: slice = slice(None)) -> None:
    """Each record in a produce request of its own; ``part``: a slice of each topic's records.

    tansu answers ListOffsets(latest) with the last batch's base offset + 1, and
    Spark's Kafka source plans its reads to that answer: on tansu it sees a log
    whole only if the log ends in a one-record batch.
    """
    s = log.scenario
    if part.start is None:
        create_topic(bootstrap, s.user_topic, len(USER_PARTITION_SIZES))
        user = [(p, b"k", b"v", None) for p, n in enumerate(USER_PARTITION_SIZES)
                for _ in range(n)]  # fmt: skip
        write_records(bootstrap, s.user_topic, user)
    for topic, records in ((s.topics.metadata, log.metadata), (s.topics.offsets, log.offsets)):
        write_records(bootstrap, topic, records[part])


def write_records(bootstrap: str, topic: str, records: list[Tagged]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "batch.num.messages": 1, "enable.idempotence": True})  # fmt: skip
    for partition, key, value, tag in records:
        headers = None if tag is None else epoch_headers(tag)
        producer.produce(topic, value, key, partition, headers=headers)
        assert producer.flush(30) == 0
