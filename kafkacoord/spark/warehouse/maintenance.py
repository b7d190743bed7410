"""Table maintenance off the batch path: Delta optimize, then vacuum, on tables with many files."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pyarrow as pa
import structlog

from .delta import Warehouse

log = structlog.get_logger(__name__)


class Maintenance:
    """Compacts tables (``Warehouse.compact``) in a thread woken after batches, so a
    micro-batch never waits for an optimize."""

    def __init__(
        self,
        warehouse: Warehouse,
        schemas: Mapping[str, pa.Schema],
        *,
        interval_s: float = 5.0,
    ) -> None:
        self._warehouse = warehouse
        self._schemas = dict(schemas)
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.merges = 0

    def run_once(self, *, full: bool = False, max_merges: int = 64) -> int:
        """Compact every table that needs it; returns the compactions done."""
        done = 0
        for table, schema in self._schemas.items():
            while done < max_merges and self._warehouse.compact(table, schema, full=full):
                done += 1
                if full:
                    break
        self.merges += done
        return done

    def notify(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="kafkacoord-maintenance", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_once()
            except Exception as exc:  # compaction is an optimisation: never fatal
                log.warning("compaction failed; retrying later", error=str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
