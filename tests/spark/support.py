"""Writing records to a real broker and reading what the daemon's cache makes of them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import AvroModel
from kafkacoord.storage.cache import StateCache
from kafkacoord.storage.clients import admin_client, replay_consumer
from kafkacoord.storage.fold import metadata_policy, offsets_policy
from kafkacoord.storage.recovery import ShardLoad, ShardRecovery
from kafkacoord.storage.topics import InternalTopics, ensure_topics, topic_identities
from tests.appender import Appender

Raw = tuple[int, bytes | None, bytes | None]


def record(key: AvroModel, value: AvroModel | None, partition: int = 0) -> Raw:
    return partition, encode_key(key), None if value is None else encode_value(value)


def internal_topics(bootstrap: str, prefix: str, offsets_partitions: int = 3) -> InternalTopics:
    topics = InternalTopics(prefix=prefix, offsets_partitions=offsets_partitions)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    return topics


def append(bootstrap: str, topic: str, records: Iterable[Raw]) -> int:
    """Durably append, in order; returns how many."""
    with Appender(bootstrap, client_id="spark-test-writer") as appender:
        futures = [appender.append(topic, p, k, v) for p, k, v in records]  # type: ignore[arg-type]
        for future in futures:
            future.result(timeout=60)
    return len(futures)


def produce_batched(bootstrap: str, topic: str, partition: int, values: Sequence[bytes]) -> None:
    """Many records per producer batch: the case ListOffsets gets wrong on the embedded broker."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "acks": "all"})
    for value in values:
        producer.produce(topic, value, b"k", partition)
    assert producer.flush(30) == 0


def load_cache(
    bootstrap: str, topics: InternalTopics, path: Path, retention_ms: int
) -> tuple[StateCache, dict[str, dict[int, ShardLoad]]]:
    """The daemon's own recovery of both compacted topics into a fresh RocksDB cache."""
    cache = StateCache(path)
    identities = topic_identities(admin_client(bootstrap), [topics.metadata, topics.offsets])
    loads = {}
    for topic, policy, partitions in (
        (topics.metadata, metadata_policy(), 1),
        (topics.offsets, offsets_policy(retention_ms), topics.offsets_partitions),
    ):
        recovery = ShardRecovery(
            cache,
            lambda fetch_wait_ms=None: replay_consumer(
                bootstrap,
                "spark-test-cache",
                fetch_wait_ms=fetch_wait_ms,
                **{"auto.offset.reset": "error"},
            ),
            topic,
            policy,
        )
        loads[topic] = recovery.recover(range(partitions), identities[topic])
    return cache, loads


def by(rows: Iterable[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[f] for f in fields): r for r in rows}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = admin_client(bootstrap)  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
