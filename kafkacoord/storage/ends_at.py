"""Log end offsets as they were at an instant.

The end of a partition at an instant is the offset of its first record stamped after
it; with none, the end now. Apache Kafka answers that with ListOffsets by timestamp.
The embedded broker does not (it answers the log start for any timestamp), so there
the offset is found by bisecting the log: one record is read at each probe, about
log2(records) reads a partition. Both take timestamps as the log holds them, so a
producer's clock that ran backwards makes the answer approximate, as Kafka's is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import cast

from confluent_kafka import Consumer, KafkaError, TopicPartition

from .broker_profile import broker_profile
from .errors import BrokerUnavailableError
from .watermarks import EndOffsetProbe, Offsets, TopicPartitionKey

__all__ = ["RecordAt", "first_after", "log_end_offsets_at"]

RecordAt = Callable[[int], tuple[int, int] | None]


def log_end_offsets_at(
    bootstrap: str,
    partitions: Iterable[TopicPartitionKey],
    instant_ms: int,
    *,
    timeout_s: float = 30.0,
) -> Offsets:
    """The end offset of each of ``partitions`` as of ``instant_ms``."""
    tps = sorted(set(partitions))
    if not tps:
        return {}
    with EndOffsetProbe(bootstrap, client_id="kafkacoord-as-of", timeout_s=timeout_s) as probe:
        ends = probe.latest(tps)
        if broker_profile(bootstrap).exact_list_offsets:
            listed = _offsets_for_times(probe.consumer, tps, instant_ms + 1, timeout_s)
            return {tp: ends[tp] if listed[tp] < 0 else listed[tp] for tp in tps}
        starts, consumer = probe.earliest(tps), probe.consumer

        def reader(tp: TopicPartitionKey) -> RecordAt:
            return lambda offset: _record_at_or_after(consumer, tp, offset, timeout_s)

        return {tp: first_after(reader(tp), starts[tp], ends[tp], instant_ms) for tp in tps}


def _offsets_for_times(
    consumer: Consumer, tps: list[TopicPartitionKey], timestamp_ms: int, timeout_s: float
) -> Offsets:
    """Kafka's ListOffsets by timestamp: the first offset stamped at or after it, or -1."""
    query = [TopicPartition(t, p, timestamp_ms) for t, p in tps]
    answered = consumer.offsets_for_times(query, timeout=timeout_s)
    return {(tp.topic, tp.partition): tp.offset for tp in answered}


def first_after(record_at: RecordAt, start: int, end: int, instant_ms: int) -> int:
    """Bisect [start, end) for the offset of the first record stamped after
    ``instant_ms``; ``end`` if none. ``record_at(offset)`` is the offset and time of the
    first record at or after ``offset`` (None past the last): offsets with no record
    (compacted away, transaction markers) are stepped over."""
    low, high, first = start, end, end
    while low < high:
        middle = (low + high) // 2
        found = record_at(middle)
        if found is None or found[1] > instant_ms:
            high = middle  # nothing in [middle, found) exists
            if found is not None:
                first = found[0]
        else:
            low = found[0] + 1
    return first


def _record_at_or_after(
    consumer: Consumer, tp: TopicPartitionKey, offset: int, timeout_s: float
) -> tuple[int, int] | None:
    """The offset and timestamp of the first record at or after ``offset``; None at the
    end of the log."""
    consumer.assign([TopicPartition(tp[0], tp[1], offset)])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1, 0.1):
                error = message.error()
                if error is None:
                    return cast(int, message.offset()), message.timestamp()[1]
                if error.code() == KafkaError._PARTITION_EOF:
                    return None
                if error.fatal() or not error.retriable():
                    raise BrokerUnavailableError(f"reading {tp}: {error.str()}")
    finally:
        consumer.unassign()
    raise BrokerUnavailableError(f"no record of {tp} at offset {offset} within {timeout_s}s")
