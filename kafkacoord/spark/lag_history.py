"""Lag over time, kept in the warehouse: one row per group partition and time bucket.

Each round of the end-offset sampler knows the log end of every partition groups
commit for; with the warehouse's committed offsets that is every group partition's
lag at that instant. A bucket is written once, by the first round that falls in it:
the rows of a round cover every committed offset (millions, at scale), and writing
them every few seconds took the view job's time from its batches. So the table grows
with buckets x partitions, not with samples, and the current minute shows as soon as
it starts. An available-now run's last round writes its bucket again, so a one-shot
run ends with the lag it left. Buckets older than the retention get tombstones, which
compaction drops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

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
    """Turns the first sampling round of each bucket into ``lag_samples`` rows, and
    expires old buckets. :meth:`rows` changes nothing; :meth:`recorded` takes what the
    warehouse committed, so a failed commit leaves the bucket to the next round."""

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

    def bucket(self, now_ms: int) -> int:
        return now_ms - now_ms % self.resolution_ms

    def due(self, now_ms: int) -> bool:
        """Whether the round at ``now_ms`` has a bucket to write: nothing is in it yet."""
        return self.bucket(now_ms) not in self._buckets

    def rows(
        self,
        now_ms: int,
        committed: Iterable[tuple[str, str, int, int, int]] | pa.Table,
        ends: Mapping[TP, tuple[int, int]],
        *,
        rewrite: bool = False,
    ) -> pa.Table:
        """``committed``: the visible offsets as (group, topic, partition, shard, offset)
        tuples or a table of those columns (``offset`` as ``committed_offset``); ``ends``:
        (topic, partition) -> (sampled_ms, log end offset). Partitions without an end are
        skipped. Empty when the bucket is already written, but for expired buckets;
        ``rewrite`` writes it again (its rows then replace the earlier ones)."""
        bucket = self.bucket(now_ms)
        live = (
            self._live(bucket, _committed(committed), ends)
            if rewrite or self.due(now_ms)
            else _ROWS.empty_table()
        )
        tombstones: list[tuple[object, ...]] = []
        cutoff = now_ms - self.retain_ms
        for old in sorted(b for b in self._buckets if b + self.resolution_ms <= cutoff):
            for key in sorted(self._buckets[old]):
                group_b, topic_b, partition_b, shard_b, _ = key.split(b"\x00")
                tombstones.append((key, True, group_b.decode(), topic_b.decode(),
                                   int(partition_b), int(shard_b), old, None, None,
                                   None))  # fmt: skip
        if not tombstones:
            return live
        columns = list(zip(*tombstones, strict=True))
        expired = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, _ROWS, strict=True)], schema=_ROWS
        )
        return pa.concat_tables([live, expired])

    def recorded(self, now_ms: int, rows: pa.Table) -> None:
        """``rows``, from :meth:`rows` at ``now_ms``, are committed: that bucket is written
        (even if no partition had a lag to record), and the buckets they tombstone are gone."""
        deleted = rows.column(DELETED)
        for gone in set(rows.filter(deleted).column("bucket_ms").to_pylist()):
            self._buckets.pop(gone, None)
        live = rows.filter(pc.invert(deleted)).column(KEY).to_pylist()
        self._buckets.setdefault(self.bucket(now_ms), set()).update(live)

    @staticmethod
    def _live(bucket: int, committed: pa.Table, ends: Mapping[TP, tuple[int, int]]) -> pa.Table:
        # Column by column: a round covers every committed offset (millions, at scale).
        samples = pa.table(
            {
                "topic": pa.array([tp[0] for tp in ends], pa.string()),
                "partition": pa.array([tp[1] for tp in ends], pa.int32()),
                "sampled_ms": pa.array([e[0] for e in ends.values()], pa.int64()),
                "log_end_offset": pa.array([e[1] for e in ends.values()], pa.int64()),
            }
        )
        rows = committed.join(samples, ["topic", "partition"], join_type="inner")
        n = rows.num_rows
        text = [pc.cast(rows.column(c), pa.string()) for c in ("partition", "shard")]
        keys = pc.binary_join_element_wise(
            rows.column("group"), rows.column("topic"), *text, str(bucket), "\x00"
        )
        columns = {
            KEY: pc.cast(keys, pa.binary()),
            DELETED: pa.array([False] * n, pa.bool_()),
            "bucket_ms": pa.array([bucket] * n, pa.int64()),
        }
        return pa.Table.from_arrays(
            [columns[f.name] if f.name in columns else rows.column(f.name) for f in _ROWS],
            schema=_ROWS,
        )


_COMMITTED: Final = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("shard", pa.int32()),
        ("committed_offset", pa.int64()),
    ]
)


def _committed(committed: Iterable[tuple[str, str, int, int, int]] | pa.Table) -> pa.Table:
    if isinstance(committed, pa.Table):
        return committed.select(_COMMITTED.names).cast(_COMMITTED)
    columns = list(zip(*committed, strict=True)) or [()] * len(_COMMITTED)
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, _COMMITTED, strict=True)], schema=_COMMITTED
    )


_ROWS: Final = pa.schema([pa.field(KEY, pa.binary()), pa.field(DELETED, pa.bool_()), *SCHEMA])


__all__ = ["LAG_SAMPLES", "SCHEMA", "LagRecorder"]
