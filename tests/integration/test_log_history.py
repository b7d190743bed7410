"""A partition's log read as history: a prefix up to an instant, with each record's time."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kafkacoord.codecs import RecordType, encode_key, encode_value
from kafkacoord.codecs.fencing import epoch_headers
from kafkacoord.codecs.models import (
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
    TopicKey,
)
from kafkacoord.codecs.records import group_key_filter
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.log_history import read_log
from kafkacoord.storage.topics import InternalTopics, ensure_topics

pytestmark = pytest.mark.integration

T0 = 1_790_000_000_000


def test_a_read_as_of_an_instant_is_the_log_up_to_the_first_record_after_it(
    bootstrap: str, prefix: str
) -> None:
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    # Ten node records a second apart, then one stamped earlier than the last (a clock
    # behind), a record that does not decode, and one of another key type.
    for i in range(10):
        value = encode_value(NodeValue(i, "host", 1, False, 1, 1))
        producer.produce(topics.metadata, value, encode_key(NodeKey(i)), timestamp=T0 + i * 1000)
    producer.produce(topics.metadata, encode_value(NodeValue(10, "host", 1, False, 1, 1)),
                     encode_key(NodeKey(10)), timestamp=T0 + 500)  # fmt: skip
    producer.produce(topics.metadata, b"\xff\xff", encode_key(NodeKey(11)), timestamp=T0 + 11_000)
    producer.produce(topics.metadata, None, encode_key(TopicKey("t")), timestamp=T0 + 12_000)
    assert producer.flush(30) == 0

    whole = read_log(bootstrap, topics.metadata)
    assert [r.offset for r in whole.records] == [*range(11), 12]
    assert whole.undecodable == 1 and whole.next_offset == 13
    assert whole.first_timestamp_ms == T0 and whole.first_offset == 0
    assert [r.timestamp_ms for r in whole.records[:3]] == [T0, T0 + 1000, T0 + 2000]
    assert whole.records[12 - 1].value is None  # a tombstone stays in the history

    upto = read_log(bootstrap, topics.metadata, until_ms=T0 + 4_999)
    assert [r.key for r in upto.records] == [NodeKey(i) for i in range(5)]
    assert upto.next_offset == 5  # a prefix: the earlier-stamped record 10 is after it

    nodes_only = read_log(bootstrap, topics.metadata, allowed=frozenset({RecordType.NODE}),
                          wants=lambda raw: raw != encode_key(NodeKey(3)))  # fmt: skip
    assert [r.offset for r in nodes_only.records] == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10]

    before = read_log(bootstrap, topics.metadata, until_ms=T0 - 1)
    assert before.records == [] and before.first_timestamp_ms == T0


def test_a_fenced_shard_leaders_late_appends_are_left_out_of_an_offsets_history(
    bootstrap: str, prefix: str
) -> None:
    """Leader 2 fences leader 1 (its ShardLeader record); a commit leader 1 appends after
    that, tagged with its epoch, is a zombie's, and the daemons never replay it."""
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})

    def commit(offset: int, epoch: int) -> None:
        value = encode_value(OffsetCommitValue(offset, "", T0))
        producer.produce(topics.offsets, value, encode_key(OffsetCommitKey("g", "t", 0)),
                         headers=epoch_headers(epoch))  # fmt: skip

    def leader(epoch: int) -> None:
        value = encode_value(ShardLeaderValue(epoch, epoch, "i", T0))
        producer.produce(topics.offsets, value, encode_key(ShardLeaderKey()),
                         headers=epoch_headers(epoch))  # fmt: skip

    leader(1)
    commit(10, 1)
    leader(2)
    commit(11, 1)  # the zombie's
    commit(12, 2)
    assert producer.flush(30) == 0
    wants = group_key_filter("g")

    fenced = read_log(bootstrap, topics.offsets, wants=wants, leader_fenced=True)
    offsets = [r.value.offset for r in fenced.records]  # type: ignore[union-attr]
    assert (offsets, fenced.fenced) == ([10, 12], 1)
    unfenced = read_log(bootstrap, topics.offsets, wants=wants)
    assert [r.value.offset for r in unfenced.records] == [10, 11, 12]  # type: ignore[union-attr]
