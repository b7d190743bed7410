"""Apply each micro-batch of the fold to the warehouse, exactly once.

Spark replays a batch whose commit it did not record (a crash after the
warehouse write, before Spark's commit log). The batch is still computed,
because the state store must advance, but the warehouse already holds it:
the manifest records the last batch applied, and a replay writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog
from pyspark.sql import DataFrame

from . import tables
from .warehouse import AlreadyAppliedError, Warehouse

log = structlog.get_logger(__name__)

Phase = Callable[[str, int], None]


class ViewWriter:
    """The ``foreachBatch`` function of the view query."""

    def __init__(
        self,
        warehouse: Warehouse,
        *,
        query: str = "fold",
        settings: Mapping[str, Any] | None = None,
        on_phase: Phase | None = None,
        on_commit: Callable[[pa.Table], None] | None = None,
    ) -> None:
        self.warehouse = warehouse
        self.query = query
        self.settings = dict(settings or {})
        # Test seam: called with ("written", batch) between the data files and the manifest.
        self._on_phase = on_phase
        self._on_commit = on_commit
        self.batches = 0
        # Rows the last applied batch wrote, per table (its cost follows the change).
        self.last_rows: dict[str, int] = {}
        self.committed = threading.Event()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        fold = batch.toArrow()  # one action: the batch's plan, state store included, runs once
        changes = tables.changes(fold)
        try:
            self.warehouse.commit(
                changes,
                tables.schemas(),
                query=self.query,
                batch=batch_id,
                settings=self.settings,
                before_publish=lambda: self._phase("written", batch_id),
            )
        except AlreadyAppliedError:
            log.info("batch already in the warehouse; skipped", batch=batch_id)
            return
        self._phase("published", batch_id)
        self.batches += 1
        self.last_rows = {table: rows.num_rows for table, rows in changes.items()}
        self.committed.set()
        commits = changes.get("offset_commits")
        if self._on_commit is not None and commits is not None:
            self._on_commit(commits)

    def _phase(self, name: str, batch_id: int) -> None:
        if self._on_phase is not None:
            self._on_phase(name, batch_id)


def committed_partitions(commits: pa.Table) -> set[tuple[str, int]]:
    """The (topic, partition) pairs a batch committed offsets for (lag needs their ends)."""
    live = commits.filter(pc.invert(commits.column("_deleted")))
    pairs = live.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([])
    return set(zip(pairs.column("topic").to_pylist(), pairs.column("partition").to_pylist(),
                   strict=True))  # fmt: skip
