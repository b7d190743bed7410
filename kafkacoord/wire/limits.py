"""The listener's limits, its counters, and the two bounds that are not per connection:
the process's open-file limit and the memory all connections may hold together."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Protocol

import structlog

from .frames import DEFAULT_MAX_FRAME_BYTES

log = structlog.get_logger(__name__)

# File descriptors kept for the daemon's own use: RocksDB's open SST files, its broker
# clients' sockets, logs. Connections get what the open-file limit leaves beyond this.
FD_HEADROOM = 512

# Why a connection is not being read (ListenerStats.paused counts each).
IN_FLIGHT = "in-flight"  # at max_inflight_per_connection unanswered requests
WRITE_BUFFER = "write buffer"  # its unsent replies passed write_buffer_high_bytes
MEMORY = "memory"  # all connections together passed max_buffered_bytes


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """Per-listener limits; each names the Kafka broker setting it mirrors, if any."""

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes
    max_inflight_per_connection: int = 1000  # queued.max.requests, per connection here
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    max_connections: int = 10_000  # max.connections
    # No Kafka equivalent: a frame must arrive whole this long after its first byte.
    request_read_timeout_ms: int = 30_000
    # No Kafka equivalent (its SSL engine has none): asyncio's ssl_handshake_timeout.
    tls_handshake_timeout_ms: int = 10_000
    # Unsent reply bytes of one connection above which it is not read; read again below
    # a quarter of it. Kafka mutes a channel until its one response is sent.
    write_buffer_high_bytes: int = 1024 * 1024
    # queued.max.request.bytes, counting unsent replies as well as unread requests.
    max_buffered_bytes: int = 256 * 1024 * 1024


@dataclass(slots=True)
class ListenerStats:
    connections: int = 0
    accepted: int = 0
    refused: int = 0
    requests: int = 0
    bad_frames: dict[str, int] = field(default_factory=dict)
    paused: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys((IN_FLIGHT, WRITE_BUFFER, MEMORY), 0)
    )
    """Times a connection stopped being read (or stayed stopped for a new reason), by reason."""
    reading_paused: int = 0
    """Connections not being read now."""
    frames_timed_out: int = 0
    handshakes_timed_out: int = 0
    handshakes_failed: int = 0
    pushes_dropped: int = 0
    """Pushes (hints, answering no request) dropped for a client not reading its replies."""
    buffered_bytes: int = 0
    """Now: unsent replies plus read but unhandled request bytes, all connections."""

    def bad(self, reason: str) -> None:
        self.bad_frames[reason] = self.bad_frames.get(reason, 0) + 1

    def pause(self, reason: str) -> None:
        self.paused[reason] += 1


def fit_to_fd_limit(limits: ListenerLimits, headroom: int = FD_HEADROOM) -> ListenerLimits:
    """``limits`` with max_connections this process can hold open: the soft open-file
    limit is raised towards the hard one first; if that is still short, max_connections
    is lowered, with a warning, rather than the daemon refusing to start."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to check
        return limits
    need = limits.max_connections + headroom
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    if soft != unlimited and soft < need:
        target = need if hard == unlimited else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("raised the open-file limit for max_connections", soft=soft, now=target)
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit", soft=soft, hard=hard, error=str(exc))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == unlimited or soft >= need:
        return limits
    fitted = max(soft - headroom, soft // 2, 1)
    log.warning(
        "max_connections lowered to fit the open-file limit; raise it (ulimit -n, LimitNOFILE)",
        max_connections=limits.max_connections, effective=fitted, nofile_soft=soft,
        nofile_hard=hard, headroom=headroom,
    )  # fmt: skip
    return replace(limits, max_connections=fitted)


class Holder(Protocol):
    """A connection as the budget sees it."""

    held: int
    """Bytes it holds, as last accounted."""
    held_back: bool

    def measure(self) -> int:
        """Its bytes now (a write buffer drains without telling anyone)."""
        ...

    def drained(self) -> bool:
        """Its client has taken every reply sent (as last measured)."""
        ...

    def hold_back(self, held_back: bool) -> None:
        """Stop (True) or let go (False) reading it for the budget's sake."""
        ...


class BufferBudget:
    """Bounds the bytes all connections hold together: unsent replies, unread requests.

    Past ``limit``, the connections holding the most stop being read, largest first,
    until those still read hold at most an eighth of it: a client whose replies flow
    holds next to nothing and goes on being served. All are read again once the total
    is back under half the limit, and each one sooner once its client has taken every
    reply sent: clients that never read must not stall those that do. Loop thread only.
    """

    def __init__(self, limit: int, stats: ListenerStats) -> None:
        self.limit = limit
        self.total = 0
        self._frozen = 0  # of the total, held by connections held back
        self._stats = stats
        self._holding: set[Holder] = set()
        self._back: set[Holder] = set()

    @property
    def pressed(self) -> bool:
        """Worth measuring often: some connection is held back, or soon may be."""
        return bool(self._back) or self.total > self.limit // 2

    def account(self, conn: Holder, held: int) -> None:
        delta = held - conn.held
        if not delta:
            return
        conn.held = held
        self.total += delta
        self._stats.buffered_bytes = self.total
        if conn.held_back:
            self._frozen += delta
        if held:
            self._holding.add(conn)
        else:
            self._holding.discard(conn)
        # The second test keeps a crowd of held-back connections from costing every event.
        if self.total > self.limit and self.total - self._frozen > self.limit // 8:
            self._shed()

    def _shed(self) -> None:
        reading = sorted((c for c in self._holding if not c.held_back),
                         key=attrgetter("held"), reverse=True)  # fmt: skip
        unfrozen = self.total - self._frozen
        for conn in reading:
            if unfrozen <= self.limit // 8:
                break
            unfrozen -= conn.held
            self._frozen += conn.held
            self._back.add(conn)
            conn.held_back = True
            conn.hold_back(True)

    def tick(self) -> None:
        """Re-measure the connections holding bytes; let the held back go once it fell,
        or once their clients caught up."""
        for conn in list(self._holding):
            self.account(conn, conn.measure())
        if not self._back:
            return
        fell = self.total <= self.limit // 2
        for conn in [c for c in self._back if fell or c.drained()]:
            self._back.discard(conn)
            self._frozen -= conn.held
            conn.held_back = False
            conn.hold_back(False)

    def forget(self, conn: Holder) -> None:
        self.account(conn, 0)
        if conn.held_back:
            conn.held_back = False
            self._back.discard(conn)
