"""What a shard host is built from (:class:`HostParts`), the state it is in and the
counters it keeps: shared by the host and the pieces it is made of."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from kafkacoord.storage.cache import ShardStore
from kafkacoord.storage.errors import LoadCancelledError, PoisonRecordError
from kafkacoord.storage.fold import FoldPolicy
from kafkacoord.storage.recovery import ShardLoad

from .shard import ChannelReplies, ReplySink, Shard
from .writer import ShardWriter, WriterFencedError

log = structlog.get_logger(__name__)


class HostState(enum.Enum):
    """LOADING answers COORDINATOR_LOAD_IN_PROGRESS; STOPPED answers ``unavailable``."""

    LOADING = "loading"
    ACTIVE = "active"
    STOPPED = "stopped"


@dataclass(slots=True)
class HostStats:
    """Counters of one host, for metrics and tests."""

    loads: int = 0
    load_seconds: float = 0.0
    # The last load's seconds by phase: the recovery's (read, fold, cache; standby_wait for
    # a controller taking over a standby's tail), then order, replay, activate.
    load_phases: dict[str, float] = field(default_factory=dict)
    records_loaded: int = 0
    # Log records the last load read: a takeover from a standby's tail reads only the tail.
    log_records_read: int = 0
    batches: int = 0
    records_written: int = 0
    requests: int = 0
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HostParts:
    """The I/O a host needs, built by its owner."""

    store: ShardStore
    identity: str
    policy: FoldPolicy
    recover: Callable[[], ShardLoad]
    make_shard: Callable[[], Shard]
    make_writer: Callable[[], ShardWriter]
    # Where replies go. A processor's own sink (``Processor.replies``) sends a turn's
    # replies only after the turn's cache write: hosts that share it answer together.
    replies: ReplySink = field(default_factory=ChannelReplies)


__all__ = ["HostParts", "HostState", "HostStats"]


def logged_failure(name: str, exc: Exception) -> Exception:
    """Log why host ``name`` stops: an expected stop with one line, anything else with its
    traceback."""
    if isinstance(exc, WriterFencedError):
        log.error("shard writer fenced; stepping down", shard=name, error=str(exc))
    elif isinstance(exc, PoisonRecordError):
        # Strict mode: the daemon already reports the record and stops; no traceback.
        log.error("shard load stopped at a poison record", shard=name, error=str(exc))
    elif isinstance(exc, LoadCancelledError):
        log.info("shard load cancelled", shard=name)  # its owner is closing
    else:
        log.error("shard host failed", shard=name, error=f"{type(exc).__name__}: {exc}",
                  exc_info=exc)  # fmt: skip
    return exc
