"""The shard hosts' :class:`HostObserver`, recording into Prometheus metrics.

Called on each host's own thread; prometheus_client's metrics are thread-safe and
cheap, so nothing here blocks a shard.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kafkacoord.coordinator.protocol import ErrorCode

# An append is one acks=all produce (a batch of records): milliseconds to seconds.
APPEND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def shard_kind(shard: str) -> str:
    """``offsets-7`` -> ``offsets``: a label with a bounded number of values."""
    base, _, number = shard.rpartition("-")
    return base if number.isdigit() else shard


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
        self.append_records = Counter(
            "kafkacoord_append_records", "Records the shard appended durably.",
            ["shard"], registry=registry,
        )  # fmt: skip
        self.append_seconds = Histogram(
            "kafkacoord_append_seconds",
            "Seconds per durable append (one loop turn's batch), by shard kind.",
            ["kind"], registry=registry, buckets=APPEND_BUCKETS,
        )  # fmt: skip
        self.replies = Counter(
            "kafkacoord_replies", "Replies the shards released, by api and error code.",
            ["api", "error"], registry=registry,
        )  # fmt: skip
        self._reply_counters: dict[tuple[str, ErrorCode], Counter] = {}
        # Per shard: its append counter and its kind's histogram, resolved once.
        self._append_children: dict[str, tuple[Counter, Histogram]] = {}

    def loaded(self, shard: str, seconds: float, records: int) -> None:
        self.load_seconds.labels(shard).set(seconds)
        self.load_records.labels(shard).set(records)
        self.loads.labels(shard).inc()

    def appended(self, shard: str, records: int, seconds: float) -> None:
        # Once per batch, which under load is about once per commit: as for replies.
        children = self._append_children.get(shard)
        if children is None:
            children = self._append_children[shard] = (
                self.append_records.labels(shard),
                self.append_seconds.labels(shard_kind(shard)),
            )
        children[0].inc(records)
        children[1].observe(seconds)

    def answered(self, shard: str, api: str, error: ErrorCode) -> None:
        # Once per reply: resolving the labelled child costs more than counting.
        child = self._reply_counters.get((api, error))
        if child is None:
            child = self._reply_counters[(api, error)] = self.replies.labels(api, error.name)
        child.inc()


__all__ = ["APPEND_BUCKETS", "PrometheusObserver", "shard_kind"]
