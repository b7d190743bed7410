"""Lag over time, kept in the warehouse: one row per group partition and time bucket.

Each round of the end-offset sampler knows the log end of every partition groups
commit for; with the warehouse's committed offsets that is every group partition's
lag at that instant. Rows are keyed by bucket, so the newest sample of a bucket wins
and the table grows with buckets x partitions, not with samples. Buckets older than
the retention get tombstones, which compaction then drops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import pyarrow as pa

from .warehouse.rows import DELETED, KEY

TP = tuple[str, int]
LAG_SAMPLES: Final = "lag_samples"
RESOLUTION_MS: Final = 60_000
RETAIN_MS: Final = 7 * 24 * 3600 * 1000  # as long as offsets are kept by default

SCHEMA: Final = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        # The offsets partition the commit is on, as group_offsets' coordinator_shard.
        ("shard", pa.int32()),
        ("bucket_ms", pa.int64()),
        ("sampled_ms", pa.int64()),
        ("committed_offset", pa.int64()),
        ("log_end_offset", pa.int64()),
    ]
)


def _key(group: str, topic: str, partition: int, shard: int, bucket_ms: int) -> bytes:
    return b"\x00".join(
        (group.encode(), topic.encode(), str(partition).encode(), str(shard).encode(),
         str(bucket_ms).encode())
    )  # fmt: skip


class LagRecorder:
    """Turns one sampling round into ``lag_samples`` rows, and expires old buckets."""

    def __init__(self, resolution_ms: int = RESOLUTION_MS, retain_ms: int = RETAIN_MS) -> None:
        if resolution_ms <= 0 or retain_ms <= 0:
            raise ValueError("lag history resolution and retention must be positive")
        self.resolution_ms = resolution_ms
        self.retain_ms = retain_ms
        # bucket -> keys written in it, to tombstone them once the bucket expires.
        self._buckets: dict[int, set[bytes]] = {}

    def load(self, existing: pa.Table) -> None:
        """Resume: the buckets the table already holds."""
        names = ["group", "topic", "partition", "shard", "bucket_ms"]
        for row in existing.select(names).to_pylist():
            bucket = row["bucket_ms"]
            key = _key(row["group"], row["topic"], row["partition"], row["shard"], bucket)
            self._buckets.setdefault(bucket, set()).add(key)

    def rows(
        self,
        now_ms: int,
        committed: Iterable[tuple[str, str, int, int, int]],
        ends: Mapping[TP, tuple[int, int]],
    ) -> pa.Table:
        """``committed``: the visible offsets as (group, topic, partition, shard, offset);
        ``ends``:
        (topic, partition) -> (sampled_ms, log end offset). Partitions without an end are
        skipped."""
        bucket = now_ms - now_ms % self.resolution_ms
        rows: list[tuple[object, ...]] = []
        written = self._buckets.setdefault(bucket, set())
        for group, topic, partition, shard, offset in committed:
            sample = ends.get((topic, partition))
            if sample is None:
                continue
            key = _key(group, topic, partition, shard, bucket)
            written.add(key)
            rows.append((key, False, group, topic, partition, shard, bucket, sample[0], offset,
                         sample[1]))  # fmt: skip
        cutoff = now_ms - self.retain_ms
        for old in [b for b in self._buckets if b + self.resolution_ms <= cutoff]:
            for key in sorted(self._buckets.pop(old)):
                group_b, topic_b, partition_b, shard_b, _ = key.split(b"\x00")
                rows.append((key, True, group_b.decode(), topic_b.decode(), int(partition_b),
                             int(shard_b), old, None, None, None))  # fmt: skip
        return pa.Table.from_pylist([dict(zip(_ROWS.names, r, strict=True)) for r in rows],
                                    schema=_ROWS)  # fmt: skip


_ROWS: Final = pa.schema([pa.field(KEY, pa.binary()), pa.field(DELETED, pa.bool_()), *SCHEMA])


__all__ = ["LAG_SAMPLES", "SCHEMA", "LagRecorder"]
