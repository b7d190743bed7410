"""Sample the log end offsets of the partitions groups commit for (lag and Burrow).

Runs beside the streaming query: end offsets move when nothing is committed,
and that is exactly when a stopped consumer must show up. Each round replaces
the small ``end_offsets`` table: per partition, the newest end and a history
of recent samples (Burrow computes each commit's lag from the end offset
known when it arrived). The first round of each lag-history bucket also writes
every group partition's lag to ``lag_samples`` (:mod:`.lag_history`), the
console's long lag history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from kafkacoord.storage.watermarks import EndOffsetProbe

from .lag_history import LAG_SAMPLES, RESOLUTION_MS, LagRecorder
from .lag_history import RETAIN_MS as LAG_RETAIN_MS
from .tables import END_OFFSETS, schemas
from .views.base import Context, Snapshot
from .views.offsets import visible_offsets
from .warehouse import Warehouse
from .warehouse.rows import DELETED, KEY

log = structlog.get_logger(__name__)

TP = tuple[str, int]
RETAIN_MS: Final = 15 * 60 * 1000
MAX_SAMPLES: Final = 256


class EndOffsetSampler:
    def __init__(
        self,
        warehouse: Warehouse,
        bootstrap: str,
        *,
        kafka: Mapping[str, str] | None = None,
        interval_s: float = 5.0,
        retain_ms: int = RETAIN_MS,
        lag_resolution_ms: int = RESOLUTION_MS,
        lag_retain_ms: int = LAG_RETAIN_MS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._warehouse = warehouse
        self._probe = EndOffsetProbe(bootstrap, client_id="kafkacoord-lag", kafka=kafka)
        self._interval_s = interval_s
        self._retain_ms = retain_ms
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._watched: set[TP] = set()
        self._history: dict[TP, list[tuple[int, int]]] = {}
        self._lag = LagRecorder(lag_resolution_ms, lag_retain_ms)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._load()

    def _load(self) -> None:
        """Resume: the partitions already committed for, and the samples already taken."""
        commits = self._warehouse.read("offset_commits", schemas()["offset_commits"],
                                       columns=["topic", "partition"])  # fmt: skip
        pairs = (
            commits.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([])
        )
        self.watch(zip(pairs.column("topic").to_pylist(), pairs.column("partition").to_pylist(),
                       strict=True))  # fmt: skip
        ends = self._warehouse.read(END_OFFSETS, schemas()[END_OFFSETS])
        for row in ends.to_pylist():
            self._history[(row["topic"], row["partition"])] = [
                (s["sampled_ms"], s["log_end_offset"]) for s in row["history"] or ()
            ]
        self._lag.load(self._warehouse.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]))

    def watch(self, pairs: Iterable[TP]) -> None:
        with self._lock:
            self._watched.update(pairs)

    def sample(self, *, last: bool = False) -> int:
        """One round; returns how many partitions got a sample. ``last``: the job's final
        round (an available-now run), which writes its lag-history bucket even if an
        earlier round did, so a one-shot run's history ends with the lag it left."""
        with self._lock:
            watched = sorted(self._watched)
        if not watched:
            return 0
        existing = set(self._probe.partitions({t for t, _ in watched}, missing_ok=True))
        asked = [tp for tp in watched if tp in existing]
        hints = {tp: h[-1][1] for tp, h in self._history.items() if h}
        ends = self._probe.latest(asked, hints=hints) if asked else {}
        now = self._clock_ms()
        for tp, end in ends.items():
            history = self._history.setdefault(tp, [])
            history.append((now, end))
            cutoff = now - self._retain_ms
            kept = [s for s in history if s[0] >= cutoff][-MAX_SAMPLES:]
            self._history[tp] = kept
        latest = {tp: h[-1] for tp, h in self._history.items() if h}
        # The visible offsets are read only for the round that writes a bucket.
        offsets = self._visible_offsets(now) if last or self._lag.due(now) else []
        lag = self._lag.rows(now, offsets, latest, rewrite=last)
        self._warehouse.commit({LAG_SAMPLES: lag}, schemas(), replace={END_OFFSETS: self._table()},
                               scope={LAG_SAMPLES: "bucket_ms"})  # fmt: skip
        self._lag.recorded(now, lag)
        return len(ends)

    def _visible_offsets(self, now_ms: int) -> pa.Table | list[tuple[str, str, int, int, int]]:
        """(group, topic, partition, shard, committed_offset) of the offsets the views show."""
        snap = Snapshot.of(self._warehouse)
        frame = visible_offsets(snap, Context.of(snap.manifest.settings, now_ms))
        if frame.empty:
            return []
        names = {"group": "group", "topic": "topic", "partition": "partition", "shard": "shard",
                 "committed_offset": "offset"}  # fmt: skip
        return pa.table({name: pa.array(frame[column]) for name, column in names.items()})

    def _table(self) -> pa.Table:
        rows = [(tp, h) for tp, h in sorted(self._history.items()) if h]
        topics = [tp[0] for tp, _ in rows]
        partitions = [tp[1] for tp, _ in rows]
        table = pa.table(
            {
                "topic": pa.array(topics, pa.string()),
                "partition": pa.array(partitions, pa.int32()),
                "log_end_offset": pa.array([h[-1][1] for _, h in rows], pa.int64()),
                "sampled_ms": pa.array([h[-1][0] for _, h in rows], pa.int64()),
                "history": pa.array(
                    [[{"sampled_ms": t, "log_end_offset": e} for t, e in h] for _, h in rows],
                    schemas()[END_OFFSETS].field("history").type,
                ),
            }
        )
        keys = pc.binary_join_element_wise(
            pc.cast(table.column("topic"), pa.binary()),
            pc.cast(pc.cast(table.column("partition"), pa.string()), pa.binary()),
            b"\x00",
        )
        table = table.add_column(0, KEY, keys)
        return table.add_column(1, DELETED, pa.array([False] * table.num_rows, pa.bool_()))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kafkacoord-lag", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # a broker hiccup must not end the view job
                log.warning("end offset sampling failed; retrying", error=str(exc))
            self._stop.wait(self._interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._probe.close()
