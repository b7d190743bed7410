"""Consumer lag over time: a bounded ring of samples per group partition, and its status.

The daemon samples every group's committed offsets and the log end offsets of their
partitions on a timer; the ring lives in the daemon, so reloading a page loses nothing.
:func:`partition_status` judges a partition's window the way Burrow's evaluator does:

- ``OK``: the consumer is caught up at some sample, or its lag is not growing;
- ``WARN``: it commits, but the lag grew at every sample of the window;
- ``STALL``: it stopped committing while there is lag and the log end moves on;
- ``STOP``: no commit over the window and the log did not move either, but lag remains.

The worst partition status is the group's.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["LagHistory", "LagSample", "Status", "group_status", "partition_status"]

TP = tuple[str, int]


class Status(IntEnum):
    """Ordered by severity: a group shows its worst partition's."""

    OK = 0
    WARN = 1
    STOP = 2
    STALL = 3


@dataclass(frozen=True, slots=True)
class LagSample:
    at_ms: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def partition_status(window: Iterable[LagSample]) -> Status:
    samples = list(window)
    if len(samples) < 2 or any(s.lag == 0 for s in samples):
        return Status.OK
    first, last = samples[0], samples[-1]
    if last.committed == first.committed:
        return Status.STALL if last.end > first.end else Status.STOP
    lags = [s.lag for s in samples]
    if all(b > a for a, b in itertools.pairwise(lags)):
        return Status.WARN
    return Status.OK


def group_status(windows: Mapping[TP, Iterable[LagSample]]) -> Status:
    return max((partition_status(w) for w in windows.values()), default=Status.OK)


class LagHistory:
    """The last ``samples`` samples of each (group, topic, partition); thread-safe."""

    def __init__(self, samples: int = 720, window: int = 10) -> None:
        self.samples = samples
        # How many of the newest samples the status judges (Burrow's window).
        self.window = window
        self._rings: dict[str, dict[TP, deque[LagSample]]] = {}
        self._lock = threading.Lock()

    def record(
        self, group: str, at_ms: int, committed: Mapping[TP, int], ends: Mapping[TP, int]
    ) -> None:
        with self._lock:
            rings = self._rings.setdefault(group, {})
            for tp, offset in committed.items():
                end = ends.get(tp)
                if end is None:
                    continue
                ring = rings.get(tp)
                if ring is None:
                    ring = rings[tp] = deque(maxlen=self.samples)
                ring.append(LagSample(at_ms, offset, end))
            for tp in set(rings) - set(committed):
                del rings[tp]  # offsets deleted or expired: the partition is gone

    def forget(self, live_groups: Iterable[str]) -> None:
        """Drop the rings of groups that no longer exist."""
        keep = set(live_groups)
        with self._lock:
            for group in set(self._rings) - keep:
                del self._rings[group]

    def series(self, group: str) -> dict[TP, list[LagSample]]:
        with self._lock:
            return {tp: list(ring) for tp, ring in self._rings.get(group, {}).items()}

    def status(self, group: str) -> tuple[Status, dict[TP, Status]]:
        series = self.series(group)
        per = {tp: partition_status(s[-self.window :]) for tp, s in series.items()}
        return max(per.values(), default=Status.OK), per

    def total(self, group: str) -> list[tuple[int, int]]:
        """(time, summed lag) per sampling instant, oldest first: the chart's line."""
        sums: dict[int, int] = {}
        for samples in self.series(group).values():
            for s in samples:
                sums[s.at_ms] = sums.get(s.at_ms, 0) + s.lag
        return sorted(sums.items())
