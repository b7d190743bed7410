"""The views, computed from the warehouse tables with pandas and pyarrow (no JVM).

``read_view(warehouse, "group_offsets")`` returns a ``pyarrow.Table``: hand it
to pandas (``.to_pandas()``), DuckDB (``duckdb.sql("select * from t")``) or
Spark (``spark.createDataFrame(t.to_pandas())``). Columns that depend on the
time (expiry, Burrow status) are evaluated at read time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from ..warehouse import Warehouse
from .base import Context, Snapshot, View
from .cluster import (
    BROKERS,
    LEADERSHIP_HISTORY,
    PARTITIONS,
    brokers,
    leadership_history,
    partitions,
)
from .groups import GROUP_MEMBERS, GROUPS, group_members, groups
from .history import METADATA_HISTORY_VIEW, metadata_history
from .offsets import (
    GROUP_OFFSETS,
    LAG_HISTORY,
    LAG_STATUS,
    LOG_END_OFFSETS,
    group_offsets,
    lag_history,
    lag_status,
    log_end_offsets,
)
from .skipped import SKIPPED_VIEW, skipped

VIEWS: Final[dict[str, tuple[View, pa.Schema]]] = {
    "groups": (groups, GROUPS),
    "group_members": (group_members, GROUP_MEMBERS),
    "group_offsets": (group_offsets, GROUP_OFFSETS),
    "lag_status": (lag_status, LAG_STATUS),
    "lag_history": (lag_history, LAG_HISTORY),
    "partitions": (partitions, PARTITIONS),
    "brokers": (brokers, BROKERS),
    "leadership_history": (leadership_history, LEADERSHIP_HISTORY),
    "metadata_history": (metadata_history, METADATA_HISTORY_VIEW),
    "log_end_offsets": (log_end_offsets, LOG_END_OFFSETS),
    "skipped": (skipped, SKIPPED_VIEW),
}


class UnknownViewError(KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no view named {name!r}; views: {', '.join(VIEWS)}")


def read_view(
    warehouse: Warehouse | Path | str,
    name: str,
    *,
    now_ms: int | None = None,
    snapshot: Snapshot | None = None,
    **settings: Any,
) -> pa.Table:
    """The current rows of view ``name``; ``settings`` override the job's (e.g. retention_ms)."""
    if name not in VIEWS:
        raise UnknownViewError(name)
    if snapshot is None:
        store = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
        snapshot = Snapshot.of(store)
    view, _ = VIEWS[name]
    return view(snapshot, Context.of(snapshot.manifest.settings, now_ms, **settings))


__all__ = ["VIEWS", "Context", "Snapshot", "UnknownViewError", "read_view"]
