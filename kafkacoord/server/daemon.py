"""The kafkacoord daemon: broker connection, internal topics, cache, shard loading,
the request listener, then the controller (on whichever daemon wins the election) and
this daemon's own node agent, through which the controller places group-coordinator
shards on it.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import FrameType

import structlog

from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import LISTENER_ENDPOINT
from kafkacoord.console.app import Console
from kafkacoord.console.cluster import ClusterAccess
from kafkacoord.coordinator.controller.config import COORDINATOR_ROLE
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.processor import LoopProcessor
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.gc_pause import raise_young_threshold
from kafkacoord.server import embedded
from kafkacoord.server.console_policy import console_http_limits, console_policy
from kafkacoord.server.lag_service import LagService
from kafkacoord.server.listener_policy import check_listener
from kafkacoord.server.ops import OpsService, StatusSource
from kafkacoord.server.services.controller import ControllerService
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.server.services.factory import controller_service, group_service
from kafkacoord.server.services.groups import GroupService
from kafkacoord.server.services.rebirth import recreate_topics, wipe_cache
from kafkacoord.server.services.watchdog import (
    BrokerWatchdog,
    IdentityChange,
    TopicIdentityProbe,
)
from kafkacoord.server.settings import Settings
from kafkacoord.storage.batch_producer import IoLoop
from kafkacoord.storage.broker import EmbeddedBroker
from kafkacoord.storage.cache import StateCache
from kafkacoord.storage.clients import admin_client, broker_count, replay_consumer
from kafkacoord.storage.errors import (
    BrokerUnavailableError,
    EmbeddedBrokerError,
    PoisonRecordError,
    StorageError,
)
from kafkacoord.storage.fold import FoldPolicy, metadata_policy, offsets_policy
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_config import client_config_of
from kafkacoord.storage.kafka_security import KAFKACOORD
from kafkacoord.storage.poison import add_strict_listener, remove_strict_listener, set_strict
from kafkacoord.storage.recovery import DEFAULT_DELETE_RETENTION_MS, ShardLoad, ShardRecovery
from kafkacoord.storage.reseed import reseed
from kafkacoord.storage.topics import delete_retention, ensure_topics
from kafkacoord.threads import Supervisor, spawn, supervising
from kafkacoord.wire import Listener, server_context

log = structlog.get_logger(__name__)

# How long a stopped daemon waits for its services' threads to end.
STOP_THREADS_S = 2.0


class CacheLockedError(StorageError):
    """Another process holds the RocksDB cache."""


@dataclass
class DaemonState:
    bootstrap: str = ""
    identities: dict[str, str] = field(default_factory=dict)
    delete_retention: dict[str, int] = field(default_factory=dict)
    """Each internal topic's own delete.retention.ms: how old a warm cache may be."""
    loads: dict[str, dict[int, ShardLoad]] = field(default_factory=dict)
    ready: bool = False


class Daemon:
    """One kafkacoord process: broker, internal topics, cache, listener, election, shards."""

    def __init__(self, settings: Settings) -> None:
        # Before anything starts: raises ListenerSecurityError on an open listener.
        self._listener_warning = check_listener(settings)
        self.settings = settings
        self.state = DaemonState()
        self._stop = threading.Event()
        # Owns every thread the daemon's services start (kafkacoord/threads.py).
        self.threads = Supervisor(f"daemon-{settings.node_id}")
        self._broker: EmbeddedBroker | KafkaBroker | None = None
        self._cache: StateCache | None = None
        self.listener: Listener | None = None
        self.dispatcher = RequestDispatcher(
            self._to_controller, self._to_groups,
            admin_principals=settings.admin_principals if settings.tls_client_ca else None,
            node_principals=settings.node_principals,
            offsets_partitions=settings.offsets_partitions,
        )  # fmt: skip
        self.controller: ControllerService | None = None
        self.groups: GroupService | None = None
        self.agent: NodeAgent | None = None
        self.incarnation = uuid.uuid4().hex
        # Set when the daemon must stop with an error (a poison record in strict mode).
        self.failure: StorageError | None = None
        self.rebuilds = 0
        self._probe: TopicIdentityProbe | None = None
        self._watchdog: BrokerWatchdog | None = None
        # Serialises starting and stopping the services (a rebuild against stop()).
        self._lifecycle = threading.Lock()
        status = StatusSource(
            settings.node_id,
            started=lambda: self.state.ready,
            controller=lambda: self.controller,
            groups=lambda: self.groups,
            listener=lambda: self.listener,
            dispatcher=self.dispatcher,
        )
        self.ops = OpsService(status, loads=lambda: self.state.loads)
        self._console: ClusterAccess | None = None
        self._lag = LagService(
            settings,
            self.ops.lag,
            lambda shard: self.groups is not None and self.groups.leads(shard),
        )

    def run(self) -> int:
        """Start, serve until SIGINT/SIGTERM, stop. Returns the process exit code."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        try:
            self.start()
            self._stop.wait()
        finally:
            self.stop()
        if self.failure is not None:
            raise self.failure  # found on a background thread: exit as a start-up error would
        return 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("stopping", signal=signal.Signals(signum).name)
        self._stop.set()

    def request_stop(self) -> None:
        self._stop.set()

    def _on_strict_failure(self, error: PoisonRecordError) -> None:
        # Any reader, on any thread, may meet the poison record: stop the whole daemon.
        if self.failure is None:
            self.failure = error
            log.error("poison record in strict mode; stopping", topic=error.topic,
                      partition=error.partition, offset=error.offset, error=str(error))  # fmt: skip
        self._stop.set()

    def start(self) -> None:
        with supervising(self.threads):
            self._start()

    def _start(self) -> None:
        s = self.settings
        started = time.monotonic()
        set_strict(s.strict_records)
        add_strict_listener(self._on_strict_failure)
        raise_young_threshold()
        # Up first, so /health answers (503) while the daemon loads.
        self.ops.serve(s.metrics_host, s.metrics_port, console_http_limits(s),
                       s.console_allowed_hosts)  # fmt: skip
        s.data_dir.mkdir(parents=True, exist_ok=True)
        bootstrap = s.kafka_bootstrap(s.bootstrap) if s.bootstrap else self._start_embedded_broker()
        _check_batch_producer_auth(bootstrap)
        self.state.bootstrap = bootstrap
        self.ops.watch_broker(bootstrap)
        admin = admin_client(bootstrap, f"kafkacoord-{s.node_id}-admin")
        brokers = broker_count(admin, bootstrap)
        rf = min(s.offsets_replication_factor, brokers)

        self.state.identities = ensure_topics(admin, s.topics.specs(), replication_factor=rf)
        self.state.delete_retention = delete_retention(admin, list(self.state.identities))
        self._cache = self._open_cache()
        if self._broker is not None:
            self._reseed_embedded(bootstrap)
        topics = s.topics
        self._start_listener()
        self._load_and_start(bootstrap)
        self.state.ready = True
        offsets = self.state.loads[topics.offsets].values()
        metadata = self.state.loads[topics.metadata].values()
        assert self.listener is not None
        log.info(
            "daemon ready",
            node_id=s.node_id,
            bootstrap=bootstrap,
            endpoint=self.listener.advertised,
            shards=len(offsets) + 1,
            records_replayed=sum(load.stats.records for load in offsets),
            poison_skipped=sum(load.stats.poison for load in [*metadata, *offsets]),
            seconds=round(time.monotonic() - started, 3),
        )
        self._start_console(bootstrap)

    def _start_console(self, bootstrap: str) -> None:
        """The web console on the metrics port: the same reads and admin calls as the CLI,
        behind a login (kafkacoord/server/console_policy.py decides who may do what)."""
        s = self.settings
        server = self.ops.server
        if server is None:
            return
        self._stop_console()  # a rebuild starts it again
        history = self._lag.start(bootstrap)  # the lag metrics need it, console or not
        if not s.console:
            return
        policy = console_policy(s)
        if policy.refusal is not None:
            log.error("console not served", reason=policy.refusal, host=s.metrics_host)
            return
        self._console = ClusterAccess(
            bootstrap, s.topics, offsets_partitions=s.offsets_partitions, tls=s.client_tls(),
            client_id=f"kafkacoord-{s.node_id}-console", writer=policy.writer,
            lag=history,
        )  # fmt: skip
        console = Console(self._console, writes=policy.writer is not None,
                          read_only_reason=policy.read_only_reason, auth=policy.auth,
                          warehouse=s.console_warehouse)  # fmt: skip
        self.ops.mount_console(console)
        log.info("console ready", url=f"{server.url}/", writes=policy.writer is not None,
                 login_to_read=policy.auth.login_to_read, users=len(s.console_users),
                 read_only_reason=policy.read_only_reason or None)  # fmt: skip

    def _stop_console(self) -> None:
        self.ops.mount_console(None)
        if self._console is not None:
            self._console.close()
            self._console = None
        self._lag.close()

    def _start_listener(self) -> None:
        s = self.settings
        host, _, port = s.listen.rpartition(":")
        tls = None
        if s.tls_cert is not None and s.tls_key is not None:
            tls = server_context(s.tls_cert, s.tls_key, s.tls_client_ca)
        self.listener = Listener(
            host.strip("[]"), int(port), self.dispatcher, limits=s.listener_limits(),
            ssl_context=tls, advertised=s.advertised_listener,
        ).start()  # fmt: skip
        log.info("listening", endpoint=self.listener.endpoint, advertised=self.listener.advertised,
                 tls=tls is not None, mutual_tls=s.tls_client_ca is not None)  # fmt: skip
        if self._listener_warning is not None:
            log.warning(self._listener_warning, setting="allow_plaintext_admin")

    def _to_controller(self, request: Request) -> None:
        controller = self.controller
        if controller is None:
            reject(request, ErrorCode.NOT_CONTROLLER, "this daemon is not serving yet")
        else:
            controller.dispatch(request)

    def _to_groups(self, requests: list[tuple[int, Request]]) -> None:
        groups = self.groups
        if groups is None:
            for _, request in requests:
                reject(request, ErrorCode.NOT_COORDINATOR, "this daemon is not serving yet")
        else:
            groups.dispatch(requests)

    def _load_and_start(self, bootstrap: str) -> None:
        s = self.settings
        topics = s.topics
        self._load(topics.metadata, [0], metadata_policy())
        # The election's first join can take seconds (the embedded broker holds a new
        # group's join about 2 s): it runs while the offsets shards load.
        self._start_controller(bootstrap)
        self._load(
            topics.offsets, range(s.offsets_partitions), offsets_policy(s.offsets_retention_ms)
        )
        self._start_services(bootstrap)

    def _start_controller(self, bootstrap: str) -> None:
        assert self._cache is not None and self.listener is not None
        s = self.settings
        if self._probe is None:
            self._probe = TopicIdentityProbe(bootstrap, client_id=f"kafkacoord-{s.node_id}-probe")
        self.controller = controller_service(
            s, bootstrap, self._cache, self.state.identities[s.topics.metadata],
            config=s.controller_config(), incarnation=self.incarnation,
            endpoint=self.listener.advertised, observer=self.ops.observer,
            identity_probe=self._probe.identity,
            delete_retention_ms=self.state.delete_retention.get(s.topics.metadata,
                                                                DEFAULT_DELETE_RETENTION_MS),
        ).start()  # fmt: skip

    def _start_services(self, bootstrap: str) -> None:
        assert self._cache is not None and self._probe is not None
        s = self.settings
        topics = s.topics
        # Every later load checks that the broker still has the topics the cache came from.
        probe = self._probe.identity
        assert self.listener is not None
        endpoint = self.listener.advertised
        loop, loop_thread = self.listener.loop, self.listener.thread_id
        assert loop is not None and loop_thread is not None
        self.groups = group_service(
            s, bootstrap, self._cache, self.state.identities[topics.offsets],
            config=s.group_config(), observer=self.ops.observer, identity_probe=probe,
            delete_retention_ms=self.state.delete_retention.get(topics.offsets,
                                                                DEFAULT_DELETE_RETENTION_MS),
            processor=LoopProcessor(loop, loop_thread, "group-shards"),
            appends_loop=IoLoop.running(loop, loop_thread),
        ).start()  # fmt: skip
        self.agent = NodeAgent(
            bootstrap, node_id=s.node_id, handler=self.groups, rack=s.rack,
            endpoints={LISTENER_ENDPOINT: endpoint}, roles=[COORDINATOR_ROLE],
            topic_prefix=s.topic_prefix, tls=s.client_tls(),
            heartbeat_interval_ms=s.node_heartbeat_interval_ms,
        )  # fmt: skip
        self.groups.agent = self.agent
        # Registration waits for a controller, possibly this daemon's own: not on this thread.
        spawn("agent-start", self._start_agent, self.agent)
        self._watchdog = BrokerWatchdog(
            self._probe, self.state.identities, self._on_broker_changed,
            interval_s=s.broker_check_interval_ms / 1000,
        ).start()  # fmt: skip

    def _start_agent(self, agent: NodeAgent) -> None:
        # The agent is fixed per thread: a rebuild starts a new agent on a new thread.
        while not self._stop.is_set() and agent is self.agent:
            try:
                agent.start(timeout_s=30)
                return
            except RequestError as exc:
                log.warning("node registration failed; retrying", error=str(exc))

    # -- broker loss ---------------------------------------------------------------------

    def _on_broker_changed(self, changes: list[IdentityChange]) -> None:
        """The broker lost the internal topics: start over from the new, empty log."""
        log.warning("broker identity changed; rebuilding", node_id=self.settings.node_id,
                    topics={c.topic: {"loaded": c.loaded, "now": c.current}
                            for c in changes})  # fmt: skip
        with self._lifecycle:
            if self._stop.is_set():
                return
            self.state.ready = False
            self.rebuilds += 1
            previous = dict(self.state.identities)
            # The console's clients hold the lost topics' ids too: they go with the services.
            self._stop_console()
            while not self._stop.is_set():
                # Nothing of the previous life may answer another request.
                self._stop_services()
                try:
                    self._rebuild(previous)
                    return
                except Exception as exc:  # the broker is still settling: any step may fail
                    log.warning("rebuild failed; retrying", error=f"{type(exc).__name__}: {exc}")
                    self._stop.wait(1.0)

    def _rebuild(self, previous: dict[str, str]) -> None:
        assert self._cache is not None
        s, bootstrap = self.settings, self.state.bootstrap
        started = time.monotonic()
        # A new client: the old one holds the lost topics' ids in its metadata cache.
        self._probe = TopicIdentityProbe(bootstrap, client_id=f"kafkacoord-{s.node_id}-probe")
        admin = admin_client(bootstrap, f"kafkacoord-{s.node_id}-admin")
        rf = min(s.offsets_replication_factor, broker_count(admin, bootstrap))
        self.state.identities = recreate_topics(
            admin, self._probe, s.topics.specs(), replication_factor=rf, previous=previous
        )
        self.state.delete_retention = delete_retention(admin, list(self.state.identities))
        wiped = wipe_cache(self._cache, [s.topics.metadata, s.topics.offsets])
        self._load_and_start(bootstrap)
        self.state.ready = True
        log.info("daemon rebuilt", node_id=s.node_id, rebuilds=self.rebuilds, shards_wiped=wiped,
                 seconds=round(time.monotonic() - started, 3))  # fmt: skip
        self._start_console(bootstrap)

    def _start_embedded_broker(self) -> str:
        # The broker gets SIGKILL when the thread that starts it ends (PR_SET_PDEATHSIG), so
        # this runs on the daemon's main thread, from start(); never from a worker thread.
        s = self.settings
        previous = embedded.remembered(s.data_dir)
        embedded.stop_stale(previous)
        port = embedded.choose_port(s.embedded_broker_port, previous, s.embedded_broker)
        if s.embedded_broker == "kafka":
            self._broker = KafkaBroker(
                s.data_dir / "kafka", port=port, log_path=s.data_dir / "kafka.log",
                secure=s.embedded_kafka_secure, topic_prefix=s.topic_prefix,
            )  # fmt: skip
        elif s.embedded_kafka_secure:
            raise EmbeddedBrokerError('embedded_kafka_secure needs embedded_broker = "kafka"')
        else:
            self._broker = EmbeddedBroker(port=port, log_path=s.data_dir / "tansu.log")
        self._broker.start()
        assert self._broker.pid is not None
        embedded.remember(
            s.data_dir,
            embedded.BrokerRecord(s.embedded_broker, self._broker.port, self._broker.pid),
        )
        # Lets the admin commands on this machine find the embedded broker.
        (s.data_dir / "bootstrap").write_text(self._broker.bootstrap)
        if isinstance(self._broker, KafkaBroker):
            return self._broker.bootstrap_as(KAFKACOORD)  # its credentials, when secure
        return self._broker.bootstrap

    def _reseed_embedded(self, bootstrap: str) -> None:
        """A fresh embedded broker gets the cache's state back before anything is served."""
        assert self._cache is not None
        s = self.settings
        partitions = {s.topics.metadata: 1, s.topics.offsets: s.offsets_partitions}
        stats = reseed(self._cache, bootstrap, self.state.identities, partitions,
                       client_id=f"kafkacoord-{s.node_id}-reseed")  # fmt: skip
        if stats.shards:
            log.info("embedded broker re-seeded from the cache", shards=stats.shards,
                     records=stats.records, seconds=round(stats.seconds, 3))  # fmt: skip

    def _open_cache(self) -> StateCache:
        path = self.settings.data_dir / "cache"
        try:
            return StateCache(path, sync=self.settings.sync_cache)
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise CacheLockedError(
                    f"the cache at {path} is in use by another process; give each daemon "
                    "its own KAFKACOORD_DATA_DIR"
                ) from exc
            raise

    def _load(self, topic: str, partitions: range | list[int], policy: FoldPolicy) -> None:
        assert self._cache is not None
        s = self.settings
        recovery = ShardRecovery(
            self._cache,
            lambda fetch_wait_ms=None: replay_consumer(
                self.state.bootstrap,
                f"kafkacoord-{s.node_id}-loader",
                fetch_wait_ms=fetch_wait_ms,
                **{"auto.offset.reset": "error"},
            ),
            topic,
            policy,
            strict=s.strict_records,
            chunk_records=s.load_chunk_records,
            delete_retention_ms=self.state.delete_retention.get(topic, DEFAULT_DELETE_RETENTION_MS),
            progress_interval_s=s.load_progress_interval_s,
        )
        self.state.loads[topic] = loads = recovery.recover(partitions, self.state.identities[topic])
        for load in loads.values():
            if load.stats.records or load.rebuilt:
                log.info("shard loaded", shard=str(load.shard), records=load.stats.records,
                         poison=load.stats.poison, rebuilt=load.rebuilt,
                         next_offset=load.next_offset, seconds=round(load.seconds, 3))  # fmt: skip

    def _stop_services(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        # The controller first: leaving the election at once lets a standby take over.
        if self.controller is not None:
            self.controller.close()
            self.controller = None
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        if self.groups is not None:
            self.groups.close()
            self.groups = None

    def stop(self) -> None:
        self.state.ready = False  # /health reports 503 while the services go down
        self._stop.set()  # a rebuild in progress gives up at its next step
        with self._lifecycle:
            self._stop_services()
        self._stop_console()
        # After the services: their last replies (NOT_COORDINATOR) still reach callers.
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        self.ops.close()
        remove_strict_listener(self._on_strict_failure)
        left = self.threads.stop(timeout_s=STOP_THREADS_S)
        if left:
            log.warning("threads still running after stop", threads=left)
        log.info("daemon stopped")


def _check_batch_producer_auth(bootstrap: str) -> None:
    """Refuse at start what the group shards' batch producer cannot authenticate with."""
    config = client_config_of(bootstrap)
    if config is not None and config.mechanism is not None and config.sasl is None:
        raise BrokerUnavailableError(
            f"{config.source}: the daemon's group shards append over their own connections, "
            f"which speak SASL/PLAIN and SCRAM-SHA-256/512, not {config.mechanism}; the CLI, "
            "node agents, group members and views take it"
        )
