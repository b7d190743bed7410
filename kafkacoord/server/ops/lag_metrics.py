"""Consumer lag as Prometheus metrics, for the groups whose shard this daemon leads.

:func:`lag_snapshot` is computed once per lag sample (not per scrape) from the
:class:`~kafkacoord.console.lag.LagHistory`; :class:`LagCollector` serves the latest
one. A group's status is Burrow's (OK, WARN or ERR): its series is 1 for the current
status and 0 for the others. Partition series stop at ``max_partitions`` (in group,
topic, partition order); ``kafkacoord_partition_lag_dropped`` counts the ones left out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric

from kafkacoord.console.lag import LagHistory, Status

__all__ = ["GROUP_STATUSES", "GroupLag", "LagCollector", "LagSnapshot", "lag_snapshot"]

# The statuses Burrow gives a group (its partitions' STOP, STALL, REWIND count as ERR).
GROUP_STATUSES = (Status.OK, Status.WARN, Status.ERR)


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    lag: int
    lag_max: int
    status: Status


@dataclass(frozen=True, slots=True)
class LagSnapshot:
    groups: list[GroupLag] = field(default_factory=list)
    # (group, topic, partition, lag), at most the cap.
    partitions: list[tuple[str, str, int, int]] = field(default_factory=list)
    dropped: int = 0


def lag_snapshot(history: LagHistory, groups: Iterable[str], max_partitions: int) -> LagSnapshot:
    """The newest lag and Burrow's status of each of ``groups`` the history holds."""
    rows: list[GroupLag] = []
    partitions: list[tuple[str, str, int, int]] = []
    dropped = 0
    for group in sorted(set(groups)):
        series = history.series(group)
        lags = {tp: samples[-1].lag for tp, samples in series.items() if samples}
        if not lags:
            continue  # no partition with a committed offset and a known end: nothing to say
        status, _ = history.status(group)
        rows.append(GroupLag(group, sum(lags.values()), max(lags.values()), status))
        for (topic, partition), lag in sorted(lags.items()):
            if len(partitions) < max_partitions:
                partitions.append((group, topic, partition, lag))
            else:
                dropped += 1
    return LagSnapshot(rows, partitions, dropped)


class LagCollector:
    """Serves the latest :class:`LagSnapshot`; none (no series) until the first one."""

    def __init__(self) -> None:
        self._snapshot = LagSnapshot()
        self._lock = threading.Lock()

    def update(self, snapshot: LagSnapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        gauge = GaugeMetricFamily
        return (
            gauge("kafkacoord_group_lag", "Summed lag of the group's partitions "
                  "(log end offset minus committed offset).", labels=["group"]),
            gauge("kafkacoord_group_lag_max", "Largest lag of one of the group's partitions.",
                  labels=["group"]),
            gauge("kafkacoord_group_status", "Burrow's status of the group: 1 for the current "
                  "one, 0 for the others.", labels=["group", "status"]),
            gauge("kafkacoord_partition_lag", "Lag of one group partition (up to "
                  "lag_metrics_max_partitions series).", labels=["group", "topic", "partition"]),
            gauge("kafkacoord_partition_lag_dropped",
                  "Group partitions without a kafkacoord_partition_lag series (over the cap)."),
        )  # fmt: skip

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            snapshot = self._snapshot
        lag, lag_max, status, partition_lag, dropped = families = self._families()
        for g in snapshot.groups:
            lag.add_metric([g.group], g.lag)
            lag_max.add_metric([g.group], g.lag_max)
            for s in GROUP_STATUSES:
                status.add_metric([g.group, s.value], 1 if s is g.status else 0)
        for group, topic, partition, value in snapshot.partitions:
            partition_lag.add_metric([group, topic, str(partition)], value)
        dropped.add_metric([], snapshot.dropped)
        return families
