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
from kafkacoord.coordinator.runtime.writer import TransactionalWriter
from kafkacoord.server.settings import Settings
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import replay_consumer
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.recovery import DEFAULT_DELETE_RETENTION_MS, ShardRecovery

from .dispatch import reject
from .election import ControllerElection

log = structlog.get_logger(__name__)

RETRY_ACTIVATION_S = 1.0


class ControllerService:
    """Runs the controller shard while this daemon holds the election lease."""

    def __init__(
        self,
        settings: Settings,
        bootstrap: str,
        cache: StateCache,
        identity: str,
        *,
        config: ControllerConfig,
        endpoint: str | None = None,
        incarnation: str | None = None,
        on_change: Callable[[bool], None] | None = None,
        observer: HostObserver | None = None,
        identity_probe: Callable[[str], str | None] | None = None,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    ) -> None:
        self.settings = settings
        self.config = config
        self.incarnation = incarnation or uuid.uuid4().hex
        self.host: ShardHost | None = None
        self.activations = 0
        # Shared by every shard this service builds: elections counted for the process.
        self.elections: Counter[str] = Counter()
        self._observer = observer
        self._identity_probe = identity_probe
        self._delete_retention_ms = delete_retention_ms
        self._bootstrap = bootstrap
        self._cache = cache
        self._identity = identity
        self._endpoint = endpoint
        self._on_change = on_change
        self._lock = threading.Lock()
        self._closed = False
        topics = settings.topics
        self._topics = topics
        name = f"kafkacoord-{settings.node_id}"
        self._election = ControllerElection(
            # One election group per life of the metadata topic: consumers of a broker's
            # previous life that rejoined the old group can never hold this election up.
            bootstrap, topics.metadata, f"{topics.prefix}controller-{identity}",
            client_id=f"{name}-elect",
            on_elected=self._activate, on_lost=self._deactivate,
            session_timeout_ms=settings.controller_session_ms,
        )  # fmt: skip

    @property
    def active(self) -> bool:
        host = self.host
        return host is not None and host.state is HostState.ACTIVE

    @property
    def elected(self) -> bool:
        """This daemon holds the election lease (it may still be loading)."""
        return self._election.active

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
        s, topics = self.settings, self._topics
        recovery = ShardRecovery(
            self._cache,
            lambda: replay_consumer(
                self._bootstrap, f"kafkacoord-{s.node_id}-controller-loader",
                **{"auto.offset.reset": "error", "isolation.level": "read_committed"},
            ),
            topics.metadata, metadata_policy(), strict=s.strict_records,
            chunk_records=s.load_chunk_records, delete_retention_ms=self._delete_retention_ms,
            # A load from a broker that lost the topic must not mix into the old cache.
            identity_probe=None if (probe := self._identity_probe) is None
            else lambda: probe(topics.metadata),
        )  # fmt: skip
        return HostParts(
            store=self._cache.shard(ShardId(topics.metadata, 0)),
            identity=self._identity,
            policy=metadata_policy(),
            recover=lambda: recovery.recover([0], self._identity)[0],
            make_shard=lambda: ControllerShard(
                self.config,
                s.node_id,
                self.incarnation,
                elections=self.elections,
                endpoint=self._endpoint,
            ),
            make_writer=lambda: TransactionalWriter(
                self._bootstrap, topics.metadata, 0, transactional_id=f"{topics.prefix}controller"
            ),
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
        if self._election.active:
            log.warning("controller stopped; retrying activation", error=str(failure))
            timer = threading.Timer(RETRY_ACTIVATION_S, self._retry)
            timer.daemon = True
            timer.start()

    def _retry(self) -> None:
        if self._election.active:
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
        self._election.close()
        host = self.host
        if host is not None:
            host.stop()
