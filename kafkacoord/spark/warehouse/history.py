"""Read the warehouse's history: any table at a Delta version or instant, and the
metadata in effect at an instant (from ``metadata_history``).

Only deltalake and pyarrow: a CLI can read history without starting Spark.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from .delta import TABLES_DIR
from .rows import KEY

METADATA_HISTORY: Final = "metadata_history"
# What makes a metadata record's key: the log partition, the record type, the key bytes.
_RECORD_KEY: Final = ("shard", "record_type", "key")


def open_table(
    warehouse_dir: Path | str,
    table: str,
    *,
    version: int | None = None,
    as_of: datetime | int | None = None,
) -> DeltaTable:
    """``table`` as of Delta ``version``, or as of the instant ``as_of`` (a datetime or
    epoch ms: the newest version committed at or before it), else its newest version.
    Versions older than the warehouse's vacuum retention may have lost their files."""
    if version is not None and as_of is not None:
        raise ValueError("give a version or an instant, not both")
    path = str(Path(warehouse_dir) / TABLES_DIR / table)
    delta = DeltaTable(path, version=version)
    if as_of is not None:
        when = as_of if isinstance(as_of, datetime) else datetime.fromtimestamp(as_of / 1000, UTC)
        delta.load_as_version(when)
    return delta


def read_table(
    warehouse_dir: Path | str,
    table: str,
    *,
    version: int | None = None,
    as_of: datetime | int | None = None,
) -> pa.Table:
    """The rows of ``table`` (with ``_key``) at a version or instant; see :func:`open_table`."""
    delta = open_table(warehouse_dir, table, version=version, as_of=as_of)
    return delta.to_pyarrow_dataset().to_table()


def metadata_history(warehouse_dir: Path | str, *, until_ms: int | None = None) -> pa.Table:
    """Every metadata record (tombstones too) in log order, up to log time ``until_ms``;
    empty before the job wrote any."""
    try:
        dataset = open_table(warehouse_dir, METADATA_HISTORY).to_pyarrow_dataset()
    except TableNotFoundError:
        return pa.table({})
    condition = None
    if until_ms is not None:
        until = pa.scalar(until_ms * 1000, pa.timestamp("us", tz="UTC"))
        condition = pc.field("log_time") <= until
    rows = dataset.to_table(filter=condition)
    return rows.drop_columns([KEY]).sort_by([("shard", "ascending"),
                                             ("log_offset", "ascending")])  # fmt: skip


def metadata_as_of(warehouse_dir: Path | str, instant_ms: int) -> pa.Table:
    """The metadata records in effect at ``instant_ms``: per record key, the newest
    record logged at or before it, unless that record is a tombstone. Partition and
    node records carry their cause (decision id, rule, trigger)."""
    rows = metadata_history(warehouse_dir, until_ms=instant_ms)
    if rows.num_rows == 0:
        return rows
    newest = rows.group_by(list(_RECORD_KEY), use_threads=False).aggregate([("log_offset", "max")])
    chosen = _position(newest.column("shard"), newest.column("log_offset_max"))
    current = rows.filter(
        pc.is_in(_position(rows.column("shard"), rows.column("log_offset")), value_set=chosen)
    )
    return current.filter(pc.invert(current.column("tombstone")))


def _position(shard: pa.ChunkedArray, offset: pa.ChunkedArray) -> pa.Array:
    # One number per (log partition, offset): offsets stay far below 2**44.
    combined = pc.add(pc.shift_left(pc.cast(shard, pa.int64()), 44), offset)
    return combined.combine_chunks() if isinstance(combined, pa.ChunkedArray) else combined
