"""Operations: Prometheus metrics, ``/health`` and the daemon status behind them."""

from .health import Health, evaluate
from .observer import PrometheusObserver
from .service import DISABLED_PORT, OpsService
from .status import ControllerStatus, DaemonStatus, ListenerCounts, StatusSource

__all__ = [
    "DISABLED_PORT",
    "ControllerStatus",
    "DaemonStatus",
    "Health",
    "ListenerCounts",
    "OpsService",
    "PrometheusObserver",
    "StatusSource",
    "evaluate",
]
