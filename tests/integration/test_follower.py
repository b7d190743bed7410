"""A metadata follower whose fetches come back empty reads on with a longer fetch wait.

tansu lists a partition's stored batches from its start within a fetch's wait and
answers with what it found by then: the followers' 50 ms wait finds nothing once the
partition holds enough batches (it never compacts). A wait of 0 finds nothing on any
partition, so the test needs no large one."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kafkacoord.client import follower as follower_module
from kafkacoord.client.follower import MetadataFollower
from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import NodeKey, NodeValue
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

pytestmark = pytest.mark.integration

BATCHES = 2_000


def test_a_follower_whose_fetches_find_nothing_reads_on_to_the_end(
    bootstrap: str, prefix: str, broker_kind: str
) -> None:
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "batch.num.messages": 1, "linger.ms": 0})  # fmt: skip
    for i in range(BATCHES):  # one record a batch, as the controller's writes come
        key = encode_key(NodeKey(i % 500))
        producer.produce(topics.metadata, encode_value(NodeValue(i, "i", 1, False, 1, 1)), key)
        if i % 1_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    seen: list[int] = []
    follower = MetadataFollower(
        bootstrap, topics.metadata, lambda _record, offset: seen.append(offset),
        client_id="test-follower", fetch_wait_ms=0,
    )  # fmt: skip
    try:
        assert follower.wait_caught_up(120), f"stalled at {follower.position} of {BATCHES}"
    finally:
        follower.close()
    assert seen == list(range(BATCHES))
    # tansu answered the zero wait with no records; Apache Kafka answers with what it has.
    assert follower.patience == (1 if broker_kind == "tansu" else 0)


def test_a_tail_idle_after_a_transaction_marker_is_not_stalled(
    bootstrap: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller writes in transactions: the log ends with a commit marker, one
    offset past the last record, so a caught-up tail's position is one short of the end
    it was told. That is the end, not a stall to read on from."""
    # Past a fetch wait (500 ms on Kafka), well short of the 10 s a test would idle for.
    monkeypatch.setattr(follower_module, "REFETCH_AFTER_S", 2.0)
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topics.metadata, encode_value(NodeValue(1, "i", 1, False, 1, 1)),
                     encode_key(NodeKey(1)))  # fmt: skip
    producer.commit_transaction(30)
    follower = MetadataFollower(bootstrap, topics.metadata, lambda _r, _o: None,
                                client_id="test-follower")  # fmt: skip
    try:
        assert follower.wait_caught_up(60)
        time.sleep(5)  # past twice the stall threshold, idle at the end of the log
        assert follower.position == 1
        assert follower.patience == 0
    finally:
        follower.close()
