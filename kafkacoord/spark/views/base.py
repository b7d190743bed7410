"""What every view reads: one consistent snapshot of the tables, and the evaluation context."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..tables import schemas as table_schemas
from ..warehouse import Manifest, Warehouse

DEFAULT_RETENTION_MS: Final = 7 * 24 * 3600 * 1000  # offsets.retention.minutes=10080
DEFAULT_IMBALANCE_PERCENT: Final = 10.0  # leader.imbalance.per.broker.percentage
DEFAULT_MIN_DISTANCE_MS: Final = 1_000  # Burrow's storage min-distance
DEFAULT_SAMPLE_GAP_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class Context:
    """Time and settings a view is evaluated with; settings default to the job's."""

    now_ms: int
    retention_ms: int = DEFAULT_RETENTION_MS
    imbalance_percent: float = DEFAULT_IMBALANCE_PERCENT
    min_distance_ms: int = DEFAULT_MIN_DISTANCE_MS
    sample_gap_ms: int = DEFAULT_SAMPLE_GAP_MS
    window: int = 10
    # Burrow's allowed-lag: a lag at most this counts as none.
    allowed_lag: int = 0

    @classmethod
    def of(cls, settings: dict[str, Any], now_ms: int | None = None, **overrides: Any) -> Context:
        known = {k: v for k, v in settings.items() if k in cls.__dataclass_fields__}
        merged = {**known, **{k: v for k, v in overrides.items() if v is not None}}
        merged["now_ms"] = int(time.time() * 1000) if now_ms is None else now_ms
        return cls(**merged)


@dataclass
class Snapshot:
    """The tables as of one manifest version, each read at most once."""

    warehouse: Warehouse
    manifest: Manifest
    _tables: dict[str, pa.Table] = field(default_factory=dict)
    _frames: dict[tuple[str, tuple[str, ...] | None], pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def of(cls, warehouse: Warehouse) -> Snapshot:
        return cls(warehouse, warehouse.manifest())

    def table(self, name: str) -> pa.Table:
        if name not in self._tables:
            self._tables[name] = self.warehouse.read(name, table_schemas()[name], self.manifest)
        return self._tables[name]

    def frame(self, name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        """The table as pandas; ``columns`` reads only those (nested lists are slow to read
        and slow in pandas)."""
        key = (name, columns)
        if key not in self._frames:
            if columns is None:
                table = self.table(name)
            elif name in self._tables:
                table = self._tables[name].select(list(columns))
            else:
                table = self.warehouse.read(name, table_schemas()[name], self.manifest,
                                            columns=columns)  # fmt: skip
            self._frames[key] = table.to_pandas()
        return self._frames[key]


View = Callable[[Snapshot, Context], pa.Table]


def ms_to_time(values: pd.Series) -> pd.Series:
    """Epoch milliseconds (nullable) as UTC timestamps."""
    return pd.to_datetime(values, unit="ms", utc=True)


def to_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """``frame`` with exactly the view's columns and types, even when empty."""
    if frame.empty:
        return schema.empty_table()
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
