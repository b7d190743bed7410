"""Log end offsets that are right on every broker.

Some brokers (tansu 0.6) answer ListOffsets(latest) with the base offset of the
last batch + 1, which is short of the end when that batch holds several records.
The high watermark in fetch responses is right, so: start a fetch one record
before the ListOffsets answer, read to partition-EOF, and take the offset there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .clients import replay_consumer
from .errors import BrokerUnavailableError

TP = tuple[str, int]


def log_end_offsets(
    bootstrap: str, partitions: Iterable[TP], *, timeout_s: float = 30.0
) -> dict[TP, int]:
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    consumer = replay_consumer(bootstrap, "kafkacoord-watermarks")
    try:
        return _read(consumer, wanted, timeout_s)
    finally:
        consumer.close()


def _read(consumer: Consumer, wanted: list[TP], timeout_s: float) -> dict[TP, int]:
    starts: list[TopicPartition] = []
    ends: dict[TP, int] = {}
    for topic, partition in wanted:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
        except KafkaException as exc:
            raise BrokerUnavailableError(f"offsets of {topic}-{partition}: {exc}") from exc
        if high <= low:
            ends[(topic, partition)] = high  # empty: EOF is immediate and right
            continue
        starts.append(TopicPartition(topic, partition, max(low, high - 1)))
        ends[(topic, partition)] = high
    if not starts:
        return ends
    consumer.assign(starts)
    pending = {(tp.topic, tp.partition) for tp in starts}
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise BrokerUnavailableError(
                f"could not read to the end of {sorted(pending)} within {timeout_s:.0f}s"
            )
        for msg in consumer.consume(10_000, 0.1):
            key = (msg.topic() or "", msg.partition() or 0)
            error = msg.error()
            if error is None:
                offset = msg.offset()
                if offset is not None:
                    ends[key] = max(ends[key], offset + 1)
            elif error.code() == KafkaError._PARTITION_EOF:
                offset = msg.offset()
                if offset is not None:
                    ends[key] = max(ends[key], offset)
                pending.discard(key)
    return ends
