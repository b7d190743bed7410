"""Test helpers: write records and compute the compacted state a replay must reach."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kafkacoord.codecs import CodecError, decode_record
from tests.appender import Appender


def append_all(
    bootstrap: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes | None]]
) -> int:
    """Durably append (partition, key, value) records; return how many."""
    with Appender(bootstrap, client_id="test-writer") as appender:
        futures = [appender.append(topic, p, k, v) for p, k, v in records]  # type: ignore[arg-type]
        for future in futures:
            future.result(timeout=60)
    return len(futures)


def read_partition(
    bootstrap: str, topic: str, partition: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of a partition, in order, read independently of kafkacoord's reader."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reference",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "timed out reading the reference copy"
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return records
                raise AssertionError(msg.error().str())
            records.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def expected_state(
    records: Iterable[tuple[int, bytes | None, bytes | None]], allowed: set[int] | None = None
) -> dict[bytes, bytes]:
    """Naive reference: decode every record in order, skip poison, last value wins."""
    state: dict[bytes, bytes] = {}
    for _, key, value in records:
        try:
            decode_record(key, value)
        except CodecError:
            continue
        assert key is not None
        if allowed is not None and key[0] not in allowed:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state
