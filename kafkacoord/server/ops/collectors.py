"""Metrics read at scrape time: the daemon's status, start-up loads and poison counts.

Custom collectors keep the hot paths free of metric updates: the numbers already live
in the services (counters, host states) and are only read when Prometheus asks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kafkacoord.coordinator.runtime.host import HostState
from kafkacoord.storage.recovery import ShardLoad

from .status import DaemonStatus

POISON_MODULE = "kafkacoord.storage.poison"

PoisonCounts = Callable[[], Mapping[str, int]]
Loads = Callable[[], Mapping[str, Mapping[int, ShardLoad]]]


class _StatusFamilies:
    """One scrape's metric families of :class:`StatusCollector`."""

    def __init__(self) -> None:
        gauge, counter = GaugeMetricFamily, CounterMetricFamily
        self.started = gauge(
            "kafkacoord_started", "1 once start-up finished (topics, cache, services)."
        )
        self.active = gauge(
            "kafkacoord_controller_active", "1 while this daemon is the active controller."
        )
        self.epoch = gauge(
            "kafkacoord_controller_epoch",
            "Epoch of this daemon's controller; present only while it is active.",
        )
        self.activations = counter(
            "kafkacoord_controller_activations", "Times this daemon became the controller."
        )
        self.standby_offset = gauge(
            "kafkacoord_controller_standby_offset",
            "Metadata log offset this daemon's hot standby has folded up to; present only "
            "while it follows the log (not the controller).",
        )
        self.elections = counter(
            "kafkacoord_leader_elections",
            "Partition leader elections this daemon's controller decided, by kind.",
            labels=["kind"],
        )
        self.shards = gauge(
            "kafkacoord_shards", "Shards this daemon leads, by host state.", labels=["state"]
        )
        self.connections = gauge(
            "kafkacoord_listener_connections", "Open client connections to this daemon."
        )
        self.accepted = counter("kafkacoord_connections_accepted", "Client connections accepted.")
        self.refused = counter(
            "kafkacoord_connections_refused", "Connections refused at max_connections."
        )
        self.received = counter(
            "kafkacoord_requests_received", "Request frames read from client connections."
        )
        self.bad_frames = counter(
            "kafkacoord_bad_frames",
            "Frames that could not be read and closed their connection, by reason.",
            labels=["reason"],
        )
        self.rejected = counter(
            "kafkacoord_request_rejects",
            "Errors answered before any shard saw the request, by error code.",
            labels=["error"],
        )
        self.requests_refused = counter(
            "kafkacoord_requests_refused",
            "Requests refused before any shard saw them, by api and reason.",
            labels=["api", "reason"],
        )
        self.auth_failures = counter(
            "kafkacoord_authorization_failures",
            "Admin and node calls refused for their principal (mutual TLS), by api.",
            labels=["api"],
        )
        self.pauses = counter(
            "kafkacoord_listener_pauses", "Times a connection stopped being read, by reason.",
            labels=["reason"],
        )  # fmt: skip
        self.paused_now = gauge(
            "kafkacoord_listener_paused_connections", "Connections not being read now."
        )
        self.frames_timed_out = counter(
            "kafkacoord_frames_timed_out",
            "Connections closed: a frame not whole within request_read_timeout_ms.",
        )
        self.handshake_errors = counter(
            "kafkacoord_tls_handshake_errors", "TLS handshakes that did not complete, by kind.",
            labels=["kind"],
        )  # fmt: skip
        self.pushes_dropped = counter(
            "kafkacoord_pushes_dropped", "Pushes dropped for clients not reading their replies."
        )
        self.buffered = gauge(
            "kafkacoord_listener_buffered_bytes",
            "Unsent replies and unread request bytes, all connections.",
        )

    def all(self) -> list[Metric]:
        return [
            self.started, self.active, self.epoch, self.activations, self.standby_offset,
            self.elections,
            self.shards, self.connections, self.accepted, self.refused, self.received,
            self.bad_frames, self.rejected, self.requests_refused, self.auth_failures,
            self.pauses,
            self.paused_now, self.frames_timed_out, self.handshake_errors, self.pushes_dropped,
            self.buffered,
        ]  # fmt: skip


class StatusCollector:
    """Controller role and epoch, elections, shard states and request counters."""

    def __init__(self, read: Callable[[], DaemonStatus]) -> None:
        self._read = read

    def describe(self) -> Iterable[Metric]:
        return _StatusFamilies().all()

    def collect(self) -> Iterable[Metric]:
        status = self._read()
        f = _StatusFamilies()
        f.started.add_metric([], 1 if status.started else 0)
        controller = status.controller
        f.active.add_metric([], 1 if controller is not None and controller.active else 0)
        if controller is not None:
            if controller.epoch is not None:
                f.epoch.add_metric([], controller.epoch)
            f.activations.add_metric([], controller.activations)
            if controller.standby_offset is not None:
                f.standby_offset.add_metric([], controller.standby_offset)
            for kind, count in sorted(controller.elections.items()):
                f.elections.add_metric([kind], count)
        for state in HostState:
            f.shards.add_metric([state.name], sum(s is state for s in status.shards.values()))
        listener = status.listener
        if listener is not None:
            f.connections.add_metric([], listener.connections)
            f.accepted.add_metric([], listener.accepted)
            f.refused.add_metric([], listener.refused)
            f.received.add_metric([], listener.requests)
            for reason, count in sorted(listener.bad_frames.items()):
                f.bad_frames.add_metric([reason], count)
            for error, count in sorted(listener.rejected.items()):
                f.rejected.add_metric([error], count)
            for (api, reason), count in sorted(listener.requests_refused.items()):
                f.requests_refused.add_metric([api, reason], count)
                if reason == "unauthorized":
                    f.auth_failures.add_metric([api], count)
            for reason, count in sorted(listener.paused.items()):
                f.pauses.add_metric([reason], count)
            f.paused_now.add_metric([], listener.reading_paused)
            f.frames_timed_out.add_metric([], listener.frames_timed_out)
            f.handshake_errors.add_metric(["timeout"], listener.handshakes_timed_out)
            f.handshake_errors.add_metric(["failed"], listener.handshakes_failed)
            f.pushes_dropped.add_metric([], listener.pushes_dropped)
            f.buffered.add_metric([], listener.buffered_bytes)
        return f.all()


class RecoveryCollector:
    """What the start-up recovery replayed into the cache, per internal-topic partition."""

    def __init__(self, loads: Loads) -> None:
        self._loads = loads

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        labels = ["topic", "partition"]
        return (
            GaugeMetricFamily(
                "kafkacoord_recovery_seconds",
                "Seconds from the start of recovery until the partition was read to its end.",
                labels=labels,
            ),
            GaugeMetricFamily(
                "kafkacoord_recovery_records",
                "Log records the start-up recovery replayed from the partition.",
                labels=labels,
            ),
        )

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        seconds, records = self._families()
        for topic, loads in sorted(dict(self._loads()).items()):
            for partition, load in sorted(dict(loads).items()):
                labels = [topic, str(partition)]
                seconds.add_metric(labels, load.seconds)
                records.add_metric(labels, load.stats.records)
        return (seconds, records)


class PoisonCollector:
    """Undecodable records skipped in this process, by topic."""

    def __init__(self, counts: PoisonCounts) -> None:
        self._counts = counts

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily(
            "kafkacoord_poison_records_skipped",
            "Undecodable (poison) records skipped in this process, by topic.",
            labels=["topic"],
        )

    def describe(self) -> Iterable[Metric]:
        return (self._family(),)

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for topic, count in sorted(dict(self._counts()).items()):
            family.add_metric([topic], count)
        return (family,)


def poison_counts_source() -> PoisonCounts | None:
    """``kafkacoord.storage.poison.poison_counts`` when this build has it, else ``None``."""
    try:
        module = importlib.import_module(POISON_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != POISON_MODULE:
            raise
        return None
    counts = getattr(module, "poison_counts", None)
    return counts if callable(counts) else None


__all__ = [
    "PoisonCollector",
    "PoisonCounts",
    "RecoveryCollector",
    "StatusCollector",
    "poison_counts_source",
]
