"""Hosts the controller shard on whichever daemon holds the election lease.

Activation (Kafka's ``onControllerFailover``, KRaft's claim): open the
transactional writer (fencing any zombie), load ``__kc_metadata`` to its end,
write the next controller epoch (naming this daemon's listener), then serve the
controller requests that reach that listener.
Losing the lease stops the host at once; a zombie that kept writing would be
fenced by the broker and ignored on replay.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable

import structlog

from kafkacoord.coordinator.controller.config import ControllerConfig
from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.observer import HostObserver
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.coordinator.runtime.writer import ShardWriter
from kafkacoord.server.settings import Settings
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.recovery import ShardRecovery

from .dispatch import reject
from .election import ControllerElection

log = structlog.get_logger(__name__)

RETRY_ACTIVATION_S = 1.0


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
        endpoint: str | None = None,
        incarnation: str | None = None,
        on_change: Callable[[bool], None] | None = None,
        observer: HostObserver | None = None,
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
        self._election: ControllerElection | None = None
        self._endpoint = endpoint
        self._on_change = on_change
        self._observer = observer
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> ControllerService:
        """Join the election: winning it activates the controller."""
        self._election = self._make_election(self._activate, self._deactivate)
        return self

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
            recover=lambda: self._recovery.recover([0], self._identity)[0],
            make_shard=lambda: ControllerShard(
                self.config,
                self.settings.node_id,
                self.incarnation,
                elections=self.elections,
                endpoint=self._endpoint,
            ),
            make_writer=self._make_writer,
        )

    def _activate(self) -> None:
        with self._lock:
            if self._closed or (self.host is not None and self.host.state is not HostState.STOPPED):
                return
            self.activations += 1
            log.info("activating controller", node_id=self.settings.node_id)
            self.host = ShardHost(
                "controller", self._parts(), unavailable=ErrorCode.NOT_CONTROLLER,
                on_stopped=self._stopped, observer=self._observer,
            ).start()  # fmt: skip
        if self._on_change is not None:
            self._on_change(True)

    def _deactivate(self) -> None:
        with self._lock:
            host = self.host
        if host is not None:
            host.stop(timeout_s=0)  # never block the election's poll thread
        if self._on_change is not None:
            self._on_change(False)

    def _stopped(self, host: ShardHost, failure: Exception | None) -> None:
        if failure is None or self._closed:
            return
        # Still holding the lease (a broker hiccup, say): try again shortly.
        if self.elected:
            log.warning("controller stopped; retrying activation", error=str(failure))
            timer = threading.Timer(RETRY_ACTIVATION_S, self._retry)
            timer.daemon = True
            timer.start()

    def _retry(self) -> None:
        if self.elected:
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
        if self._election is not None:
            self._election.close()
        host = self.host
        if host is not None:
            host.stop()
