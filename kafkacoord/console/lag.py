"""Consumer lag over time: a bounded ring of samples per group partition, and its status.

The daemon samples every group's committed offsets and the log end offsets of their
partitions on a timer; the ring lives in the daemon, so reloading a page loses nothing.
:func:`partition_status` judges a partition with Burrow's evaluator
(:mod:`kafkacoord.spark.burrow`, the one the ``lag_status`` view uses). The console sees
offsets only by polling them, so its window's commits are the changes of the committed
offset, each at the sample that first saw it, with the lag then; its broker offsets are
the last ``window`` sampled end offsets, and "now" is the group's newest sample. A
consumer that commits the same offset again cannot be told from one that stopped
committing: both are STOP (STALL only for a lone commit excused from STOP).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkacoord.spark.burrow import Commit, Rules, Status, evaluate, group_status

__all__ = ["LagHistory", "LagSample", "Status", "commits", "partition_status"]

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LagSample:
    at_ms: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def commits(samples: Iterable[LagSample]) -> list[Commit]:
    """The committed offset's changes, oldest first, each when first seen, with its lag."""
    seen: list[Commit] = []
    for s in samples:
        if not seen or seen[-1].offset != s.committed:
            seen.append(Commit(s.committed, s.at_ms, s.lag))
    return seen


def partition_status(samples: Sequence[LagSample], now_ms: int, rules: Rules) -> Status:
    """Burrow's status of one partition's samples (oldest first); OK with none."""
    if not samples:
        return Status.OK
    window = commits(samples)[-rules.intervals :]
    ends = [s.end for s in samples[-rules.intervals :]]
    return evaluate(window, samples[-1].lag, now_ms, ends, rules)


class LagHistory:
    """The last ``samples`` samples of each (group, topic, partition); thread-safe."""

    def __init__(self, samples: int = 720, window: int = 10, allowed_lag: int = 0) -> None:
        self.samples = samples
        # Burrow's window (commits and end offsets judged) and allowed-lag.
        self.rules = Rules(allowed_lag=allowed_lag, intervals=window)
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

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._rings)

    def series(self, group: str) -> dict[TP, list[LagSample]]:
        with self._lock:
            return {tp: list(ring) for tp, ring in self._rings.get(group, {}).items()}

    def status(self, group: str, now_ms: int | None = None) -> tuple[Status, dict[TP, Status]]:
        """Burrow's group status (OK, WARN or ERR) and each partition's, as of ``now_ms``
        (default: the group's newest sample, the instant the ring describes)."""
        series = self.series(group)
        if now_ms is None:
            now_ms = max((s[-1].at_ms for s in series.values() if s), default=0)
        per = {tp: partition_status(s, now_ms, self.rules) for tp, s in series.items()}
        return group_status(per.values()), per

    def total(self, group: str) -> list[tuple[int, int]]:
        """(time, summed lag) per sampling instant, oldest first: the chart's line."""
        sums: dict[int, int] = {}
        for samples in self.series(group).values():
            for s in samples:
                sums[s.at_ms] = sums.get(s.at_ms, 0) + s.lag
        return sorted(sums.items())
