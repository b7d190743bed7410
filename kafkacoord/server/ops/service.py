"""One daemon's operations surface: its metrics registry, the shard hosts' observer,
and the ``/metrics`` + ``/health`` server.

Each daemon gets its own :class:`CollectorRegistry` (never the process-global one),
so several daemons' worth of metrics can live in one process.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry, Info

from kafkacoord import BUILD, __version__

from .collectors import (
    Loads,
    PoisonCollector,
    PoisonCounts,
    RecoveryCollector,
    StatusCollector,
    poison_counts_source,
)
from .health import Health, evaluate
from .hosts import HostCheck
from .http import HttpLimits, OpsServer, ops_app
from .lag_metrics import LagCollector
from .observer import PrometheusObserver
from .probe import BrokerProbe
from .status import DaemonStatus, StatusSource

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

log = structlog.get_logger(__name__)

DISABLED_PORT = -1


class OpsService:
    def __init__(
        self, source: StatusSource, *, loads: Loads, poison_counts: PoisonCounts | None = None
    ) -> None:
        self.registry = CollectorRegistry()
        self.observer = PrometheusObserver(self.registry)
        self.source = source
        self.server: OpsServer | None = None
        self._probe: BrokerProbe | None = None
        self._console: WSGIApplication | None = None
        self.registry.register(StatusCollector(self.source.read))
        self.registry.register(RecoveryCollector(loads))
        self.lag = LagCollector()  # the daemon's lag sampler updates it
        self.registry.register(self.lag)
        counts = poison_counts if poison_counts is not None else poison_counts_source()
        if counts is not None:
            self.registry.register(PoisonCollector(counts))
        build = Info(
            "kafkacoord_build",
            "Version, node id and hot path build (compiled or the sources) of this daemon.",
            registry=self.registry,
        )
        build.info(
            {"version": __version__, "node_id": str(source.node_id), "hot_path": BUILD.value}
        )

    def watch_broker(self, bootstrap: str) -> None:
        """Health checks ask this broker from now on."""
        self._probe = BrokerProbe(bootstrap)

    def status(self) -> DaemonStatus:
        probe = self._probe
        return self.source.read(None if probe is None else probe.reachable())

    def health(self) -> Health:
        # Before watch_broker the daemon is still starting, which evaluate reports.
        return evaluate(self.status())

    def serve(
        self,
        host: str,
        port: int,
        limits: HttpLimits | None = None,
        allowed_hosts: Collection[str] = (),
    ) -> OpsServer | None:
        """Start the HTTP endpoint; a port in use is logged, not fatal (metrics are optional).
        The console answers only under the bound address and ``allowed_hosts``."""
        if port == DISABLED_PORT:
            log.info("metrics and health endpoint disabled")
            return None
        try:
            hosts = HostCheck(host, allowed_hosts)
            app = ops_app(self.registry, self.health, lambda: self._console, hosts)
            self.server = OpsServer(host, port, app, limits).start()
        except OSError as exc:
            log.warning("metrics and health endpoint not started", host=host, port=port,
                        error=str(exc))  # fmt: skip
            return None
        log.info("metrics and health endpoint listening", url=self.server.url,
                 host=host, port=self.server.port)  # fmt: skip
        return self.server

    def mount_console(self, console: WSGIApplication | None) -> None:
        """Serve the web console on every path but /metrics and /health (None: stop)."""
        self._console = console

    def close(self) -> None:
        self._console = None
        if self.server is not None:
            self.server.close()
            self.server = None


__all__ = ["DISABLED_PORT", "OpsService"]
