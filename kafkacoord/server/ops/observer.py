"""The shard hosts' :class:`HostObserver`, recording into Prometheus metrics.

Appends and replies are counted once per commit or so, where prometheus_client's
metrics (a lock per increment) cost 2 µs of the daemon's budget. They are counted
in plain per-thread tallies instead, and a collector sums them when Prometheus
scrapes. Loads are rare and use ordinary metrics.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kafkacoord.coordinator.protocol import ErrorCode

# An append is one acks=all produce (a batch of records): milliseconds to seconds.
APPEND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BUCKET_LABELS: Final = [*map(floatToGoString, APPEND_BUCKETS), "+Inf"]


def shard_kind(shard: str) -> str:
    """``offsets-7`` -> ``offsets``: a label with a bounded number of values."""
    base, _, number = shard.rpartition("-")
    return base if number.isdigit() else shard


class _Tally:
    """One thread's counts: only that thread writes them, so they need no lock."""

    __slots__ = ("append_records", "append_seconds", "replies")

    def __init__(self) -> None:
        # By (api, error): the error's name is read at scrape time, not on every reply.
        self.replies: dict[tuple[str, ErrorCode], int] = {}
        self.append_records: dict[str, int] = {}
        # Per kind: the count in each bucket (the last is +Inf), then the sum of seconds.
        self.append_seconds: dict[str, tuple[list[int], list[float]]] = {}


class _Tallies(Collector):
    """Every thread's tallies, summed into metric families at scrape time."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[_Tally] = []

    def mine(self) -> _Tally:
        tally: _Tally | None = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = _Tally()
            with self._lock:
                self._all.append(tally)
        return tally

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            tallies = list(self._all)
        replies: dict[tuple[str, str], int] = {}
        records: dict[str, int] = {}
        seconds: dict[str, tuple[list[int], float]] = {}
        for tally in tallies:
            # dict() copies in one step under the GIL while the owner may be counting.
            for (api, code), n in dict(tally.replies).items():
                key = (api, code.name)
                replies[key] = replies.get(key, 0) + n
            for shard, n in dict(tally.append_records).items():
                records[shard] = records.get(shard, 0) + n
            for kind, (counts, sum_cell) in dict(tally.append_seconds).items():
                summed, before = seconds.get(kind, ([0] * len(counts), 0.0))
                seconds[kind] = ([a + b for a, b in zip(summed, counts, strict=True)],
                                 before + sum_cell[0])  # fmt: skip
        family = CounterMetricFamily(
            "kafkacoord_replies", "Replies the shards released, by api and error code.",
            labels=["api", "error"],
        )  # fmt: skip
        for (api, name), n in sorted(replies.items()):
            family.add_metric([api, name], n)
        yield family
        family = CounterMetricFamily(
            "kafkacoord_append_records", "Records the shard appended durably.", labels=["shard"]
        )
        for shard, n in sorted(records.items()):
            family.add_metric([shard], n)
        yield family
        histogram = HistogramMetricFamily(
            "kafkacoord_append_seconds",
            "Seconds per durable append (one loop turn's batch), by shard kind.",
            labels=["kind"],
        )
        for kind, (counts, total) in sorted(seconds.items()):
            cumulative, buckets = 0, []
            for label, n in zip(_BUCKET_LABELS, counts, strict=True):
                cumulative += n
                buckets.append((label, cumulative))
            histogram.add_metric([kind], buckets, total)
        yield histogram


class PrometheusObserver:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.load_seconds = Gauge(
            "kafkacoord_shard_load_seconds",
            "Seconds the shard's last load took (cache, log tail, replay).",
            ["shard"], registry=registry,
        )  # fmt: skip
        self.load_records = Gauge(
            "kafkacoord_shard_load_records",
            "Keys replayed into the shard by its last load.",
            ["shard"], registry=registry,
        )  # fmt: skip
        self.loads = Counter(
            "kafkacoord_shard_loads", "Loads of the shard (first load and reloads).",
            ["shard"], registry=registry,
        )  # fmt: skip
        self.restarts = Counter(
            "kafkacoord_shard_restarts",
            "Times the shard was loaded again without moving, by cause.",
            ["shard", "cause"], registry=registry,
        )  # fmt: skip
        self._tallies = _Tallies()
        registry.register(self._tallies)

    def loaded(self, shard: str, seconds: float, records: int) -> None:
        self.load_seconds.labels(shard).set(seconds)
        self.load_records.labels(shard).set(records)
        self.loads.labels(shard).inc()

    def appended(self, shard: str, records: int, seconds: float) -> None:
        tally = self._tallies.mine()
        tally.append_records[shard] = tally.append_records.get(shard, 0) + records
        kind = shard_kind(shard)
        histogram = tally.append_seconds.get(kind)
        if histogram is None:
            histogram = tally.append_seconds[kind] = ([0] * len(_BUCKET_LABELS), [0.0])
        # Prometheus buckets are "less than or equal": bisect_left finds the first le >= it.
        histogram[0][bisect.bisect_left(APPEND_BUCKETS, seconds)] += 1
        histogram[1][0] += seconds

    def answered(self, shard: str, api: str, error: ErrorCode) -> None:
        replies = self._tallies.mine().replies
        key = (api, error)
        replies[key] = replies.get(key, 0) + 1

    def restarted(self, shard: str, cause: str) -> None:
        self.restarts.labels(shard, cause).inc()


__all__ = ["APPEND_BUCKETS", "PrometheusObserver", "shard_kind"]
