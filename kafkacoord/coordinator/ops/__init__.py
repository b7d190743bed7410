"""Operations: Prometheus metrics, ``/health``, and the cluster summary of ``kafkacoord status``."""

from .health import Health, evaluate
from .observer import PrometheusObserver
from .service import DISABLED_PORT, OpsService
from .status import ControllerStatus, DaemonStatus, ReceiverCounts, StatusSource

__all__ = [
    "DISABLED_PORT",
    "ControllerStatus",
    "DaemonStatus",
    "Health",
    "OpsService",
    "PrometheusObserver",
    "ReceiverCounts",
    "StatusSource",
    "evaluate",
]
