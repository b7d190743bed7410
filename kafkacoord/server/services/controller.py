"""Hosts the controller shard on whichever daemon holds the election lease.

Activation (Kafka's ``onControllerFailover``, KRaft's claim): open the
transactional writer (fencing any zombie), load ``__kc_metadata`` to its end,
write the next controller epoch (naming this daemon's listener), then serve the
controller requests that reach that listener.
Losing the lease stops the host at once; a zombie that kept writing would be
fenced by the broker and ignored on replay.

While it does not hold the lease, the daemon is a hot standby (KRaft's standby
controllers follow the metadata log): a thread folds ``__kc_metadata`` into the
RocksDB cache and keeps the decoded state, then tails the log every 2 s. The
activation's load continues that tail, so a takeover reads only what the log
gained since, and a daemon that starts loads while its election is pending.

The controller shard is driven as the group shards are, by a processor: one of its
own (a thread), since a controller step waits for its transaction's commit and a
failover's turn can be long.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

import structlog

from kafkacoord.coordinator.controller.config import ControllerConfig
from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.driven import Processor
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.observer import HostObserver
from kafkacoord.coordinator.runtime.restarts import RestartBackoff
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.coordinator.runtime.writer import ShardWriter
from kafkacoord.gc_pause import (
    FREEZE_AFTER_RECORDS,
    freeze_long_lived,
    gc_paused,
)
from kafkacoord.server.settings import Settings
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.errors import LoadCancelledError
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.recovery import ShardLoad, ShardRecovery, ShardTail
from kafkacoord.threads import later, spawn

from .dispatch import reject
from .election import ControllerElection

log = structlog.get_logger(__name__)

STANDBY_INTERVAL_S = 2.0


ElectionFactory = Callable[[Callable[[], None], Callable[[], None]], ControllerElection]
"""Joins the controller election with (on_elected, on_lost) callbacks."""


class ControllerService:
    """Runs the controller shard while this daemon holds the election lease.

    The constructor only keeps its parts (:func:`~.factory.controller_service` builds
    them); :meth:`start` joins the election.
    """

    def __init__(
        self,
        settings: Settings,
        config: ControllerConfig,
        *,
        cache: StateCache,
        identity: str,
        recovery: ShardRecovery,
        make_writer: Callable[[], ShardWriter],
        make_election: ElectionFactory,
        processor: Processor,
        endpoint: str | None = None,
        incarnation: str | None = None,
        on_change: Callable[[bool], None] | None = None,
        observer: HostObserver | None = None,
        standby_interval_s: float | None = STANDBY_INTERVAL_S,
    ) -> None:
        self.settings = settings
        self.config = config
        self.incarnation = incarnation or uuid.uuid4().hex
        self.host: ShardHost | None = None
        self.activations = 0
        # Shared by every shard this service builds: elections counted for the process.
        self.elections: Counter[str] = Counter()
        self._cache = cache
        self._identity = identity
        self._recovery = recovery
        self._make_writer = make_writer
        self._make_election = make_election
        # Drives each activation's host; closed with the service.
        self._processor = processor
        self._election: ControllerElection | None = None
        self._endpoint = endpoint
        self._on_change = on_change
        self._observer = observer
        self._lock = threading.Lock()
        self._closed = False
        self._closing = threading.Event()
        self._backoff = RestartBackoff()
        self._activation_pending = False
        # The standby's tail of the metadata log; whoever holds the lock may use the cache.
        self._tail: ShardTail | None = None
        self._tail_lock = threading.Lock()
        self._standby_interval_s = standby_interval_s
        self._standby: threading.Thread | None = None
        self.standby_passes = 0

    def start(self) -> ControllerService:
        """Start following the log (unless standby is off), then join the election:
        winning it activates the controller."""
        if self._standby_interval_s is not None:
            self._standby = spawn("controller-standby", self._follow, self._standby_interval_s)
        self._election = self._make_election(self._activate, self._deactivate)
        return self

    @property
    def standby_offset(self) -> int | None:
        """How far the standby has folded the metadata log (None: not following)."""
        tail = self._tail
        return None if tail is None else tail.load.next_offset

    @property
    def active(self) -> bool:
        host = self.host
        return host is not None and host.state is HostState.ACTIVE

    @property
    def elected(self) -> bool:
        """This daemon holds the election lease (it may still be loading)."""
        election = self._election
        return election is not None and election.active

    @property
    def joined(self) -> bool:
        """The election group has taken this daemon in (as the controller or a standby)."""
        election = self._election
        return election is not None and election.joined

    @property
    def epoch(self) -> int | None:
        """The epoch this daemon's controller writes with, while it is active."""
        shard = self.shard
        return shard.epoch if shard is not None and shard.active else None

    @property
    def shard(self) -> ControllerShard | None:
        host = self.host
        shard = None if host is None else host.shard
        return shard if isinstance(shard, ControllerShard) else None

    def _parts(self) -> HostParts:
        metadata = self.settings.topics.metadata
        return HostParts(
            store=self._cache.shard(ShardId(metadata, 0)),
            identity=self._identity,
            policy=metadata_policy(),
            recover=self._take_over,
            make_shard=lambda: ControllerShard(
                self.config,
                self.settings.node_id,
                self.incarnation,
                elections=self.elections,
                endpoint=self._endpoint,
            ),
            make_writer=self._leased_writer,
            # Sent after the turn's cache write: a reply never runs ahead of the cache.
            replies=self._processor.replies,
        )

    def _leased_writer(self) -> ShardWriter:
        """Open the writer, which fences every other: only while holding the lease, so
        a daemon that lost it mid-activation cannot fence the controller that won."""
        election = self._election
        if election is not None and not election.active:
            raise LoadCancelledError("the controller lease was lost before the writer opened")
        return self._make_writer()

    # -- the standby ---------------------------------------------------------------------

    def _follow(self, interval_s: float) -> None:
        wait_s = 0.0  # the first pass at once: a starting daemon loads while it joins
        while not self._closing.wait(wait_s):
            wait_s = interval_s
            with self._tail_lock:
                if self._closed or not self._host_finished():
                    continue  # the host owns the cache; it took (or drops) the tail
                try:
                    with gc_paused():
                        self._tail = tail = self._recovery.follow(
                            0, self._identity, self._tail, cancel=self._closing.is_set
                        )
                        # Before the collector is back: its first run would walk it all.
                        if tail.load.stats.records >= FREEZE_AFTER_RECORDS:
                            freeze_long_lived()
                except LoadCancelledError:
                    self._tail = None
                    return
                except Exception as exc:
                    # Dropped: the next pass (or the activation) starts from the checkpoint.
                    log.warning("following the metadata log failed", error=str(exc))
                    self._tail = None
                    continue
                self.standby_passes += 1

    def _host_finished(self) -> bool:
        host = self.host
        return host is None or host.finished

    def _take_over(self) -> ShardLoad:
        """The activation's load (on the host's thread): the standby's tail to the end of
        the log, or a whole load without one. Waits for a standby pass under way."""
        asked = time.monotonic()
        with self._tail_lock:
            waited = time.monotonic() - asked
            tail, self._tail = self._tail, None
            # A closing service stops the load between chunks: its owner closes the cache.
            load = self._recovery.follow(0, self._identity, tail, cancel=self._closing.is_set).load
        load.phases["standby_wait"] = waited
        return load

    def _activate(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self.host is not None and self.host.state is not HostState.STOPPED:
                # Won again while the last activation still stops (a broker restart ends
                # one lease and starts the next): its stop takes this one up.
                self._activation_pending = True
                return
            self._activation_pending = False
            self.activations += 1
            self._backoff.started()
            log.info("activating controller", node_id=self.settings.node_id)
            self.host = ShardHost(
                "controller", self._parts(), processor=self._processor,
                unavailable=ErrorCode.NOT_CONTROLLER, on_stopped=self._stopped,
                observer=self._observer,
            ).start()  # fmt: skip
        if self._on_change is not None:
            self._on_change(True)

    def _deactivate(self) -> None:
        with self._lock:
            self._activation_pending = False
            host = self.host
        if host is not None:
            host.stop(timeout_s=0)  # never block the election's poll thread
        if self._on_change is not None:
            self._on_change(False)

    def _stopped(self, host: ShardHost, failure: Exception | None) -> None:
        with self._lock:
            pending, self._activation_pending = self._activation_pending, False
        if pending and self.elected and not self._closed:
            self._activate()
            return
        if failure is None or self._closed or isinstance(failure, LoadCancelledError):
            return
        # Still holding the lease (a broker hiccup, a bug): try again shortly, and less
        # often if it keeps stopping (runtime/restarts.py). Fenced while holding it, the
        # fencer is a daemon that lost the lease and opened a writer before it noticed:
        # stepping down for good would leave the cluster with no controller.
        if self.elected:
            delay_s = self._backoff.next_delay_s()
            log.warning("controller stopped; retrying activation", delay_s=delay_s,
                        error=f"{type(failure).__name__}: {failure}")  # fmt: skip
            later(delay_s, self._retry, name="controller-retry")

    def _retry(self) -> None:
        if self.elected and not self._closed:
            if self._observer is not None:
                self._observer.restarted("controller", "stopped")
            self._activate()

    def dispatch(self, request: Request) -> None:
        """A controller request (from the listener's thread)."""
        host = self.host
        if host is None:
            reject(request, ErrorCode.NOT_CONTROLLER, "this daemon is not the active controller")
        else:
            host.submit(request)

    def close(self) -> None:
        self._closed = True
        self._closing.set()
        if self._election is not None:
            self._election.close()
        host = self.host
        if host is not None:
            host.stop()
        self._processor.close()
        if self._standby is not None and self._standby.is_alive():
            # A pass stops at its next chunk; the owner closes the cache after this.
            self._standby.join(timeout=60)
        self._tail = None
