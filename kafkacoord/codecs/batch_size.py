"""How large encoded records grow in a Kafka record batch, at most.

A broker refuses a batch over its ``max.message.bytes`` (MESSAGE_TOO_LARGE), and a
refused append costs a shard its session. So, as Kafka's coordinator runtime does, a
handler whose records cannot fit one batch is refused alone, and the appends of many
handlers are cut into batches that each fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

RawRecord = tuple[bytes, bytes | None]

MAX_BATCH_BYTES: Final = 1_000_000
"""The largest batch appended: under Kafka's default ``max.message.bytes`` (1,048,588),
with room to spare. An internal topic set lower than that refuses larger batches."""

BATCH_OVERHEAD_BYTES: Final = 61
"""A v2 record batch's header."""

MAX_RECORDS_BYTES: Final = MAX_BATCH_BYTES - BATCH_OVERHEAD_BYTES
"""What the records of one batch may take (:func:`records_bytes`)."""

RECORD_OVERHEAD_BYTES: Final = 64
"""A v2 record's length, attributes, timestamp and offset deltas, key and value lengths and
header count (varints at their widest: 27 bytes) and the leader-epoch header each record
carries (14 bytes), rounded up."""


def record_bytes(record: RawRecord) -> int:
    """The most ``record`` takes in a batch."""
    key, value = record
    return len(key) + (0 if value is None else len(value)) + RECORD_OVERHEAD_BYTES


def records_bytes(records: Iterable[RawRecord]) -> int:
    """The most ``records`` take in a batch, without the batch's header."""
    total = 0
    for record in records:
        total += record_bytes(record)
    return total


def batch_bytes(records: Iterable[RawRecord]) -> int:
    """The most one batch of ``records`` takes."""
    return BATCH_OVERHEAD_BYTES + records_bytes(records)


__all__ = [
    "BATCH_OVERHEAD_BYTES",
    "MAX_BATCH_BYTES",
    "MAX_RECORDS_BYTES",
    "RECORD_OVERHEAD_BYTES",
    "RawRecord",
    "batch_bytes",
    "record_bytes",
    "records_bytes",
]
