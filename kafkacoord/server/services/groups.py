"""Hosts the group-coordinator shards this daemon leads (Kafka's
``GroupCoordinator.onElection`` / ``onResignation``).

The controller places the logical topic ``<prefix>offsets`` on daemons like any
other topic. Leading partition p means loading ``__kc_offsets``-p (from the
RocksDB checkpoint, so only the tail is replayed) and serving the requests for p
that reach this daemon's listener. Losing p unloads it and answers its parked requests
with NOT_COORDINATOR. Followed partitions are tailed into the cache every few
seconds, so a failover replays only what the old leader wrote since.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Callable

import structlog

from kafkacoord.client.agent import NodeAgent
from kafkacoord.codecs import encode_record
from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.records import shard_leader_record
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.driven import Processor
from kafkacoord.coordinator.runtime.epoch_writer import LeaderEpochWriter, SharedProducer
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.observer import HostObserver
from kafkacoord.coordinator.runtime.restarts import RestartBackoff
from kafkacoord.coordinator.runtime.shard import Request, Result, Shard
from kafkacoord.coordinator.runtime.writer import WriterFencedError
from kafkacoord.server.settings import Settings
from kafkacoord.server.uptime import process_uptime_s
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.errors import LoadCancelledError, PoisonRecordError
from kafkacoord.storage.fold import offsets_policy
from kafkacoord.storage.recovery import ShardLoad, ShardRecovery
from kafkacoord.threads import later, spawn

from .dispatch import reject
from .topic_metadata import TopicsImage, TopicWatcher

log = structlog.get_logger(__name__)

# Stops that mean the shard is not this daemon's to serve (a newer leader fenced it), its
# owner is closing, or the daemon stops on a poison record: no restart.
_FINAL_STOPS = (WriterFencedError, LoadCancelledError, PoisonRecordError)
_LAPSED = "this daemon's node lease lapsed (no heartbeat answered within its session)"


class GroupService:
    """Loads, serves and unloads the group shards this daemon leads, and keeps a warm copy of
    the ones it follows; the controller's partition records say which.

    The constructor only keeps its parts (:func:`~.factory.group_service` builds them);
    :meth:`start` starts tailing."""

    def __init__(
        self,
        settings: Settings,
        config: GroupConfig,
        *,
        cache: StateCache,
        identity: str,
        appends: SharedProducer,
        recovery: ShardRecovery,
        processor: Processor,
        observer: HostObserver | None = None,
        warm_interval_s: float = 2.0,
        topic_watcher: Callable[[Callable[[TopicsImage], None]], TopicWatcher] | None = None,
    ) -> None:
        self.settings = settings
        self.config = config
        self.topic = settings.topics.offsets
        self.hosts: dict[int, ShardHost] = {}
        self.followed: set[int] = set()
        self._catching_up: set[int] = set()  # followed shards a thread reports in sync
        # This daemon's node agent, set by the daemon: reports followed shards as caught up.
        self.agent: NodeAgent | None = None
        self._cache = cache
        self._identity = identity
        self._appends = appends
        self._recovery = recovery
        # Every group shard of this daemon takes its turns on one thread: the
        # listener's, when the daemon hands its loop over, else a thread of their own.
        self._processor = processor
        self._observer = observer
        self._incarnation = uuid.uuid4().hex
        # Shards immigrating together are reported together, in one line.
        self._activating: set[int] = set()
        self._activating_since = 0.0
        self._activated_count = 0
        self._lock = threading.Lock()
        # Loads and tailing both write a shard's cache: one at a time per shard keeps its
        # checkpoint monotonic, while different shards load side by side.
        self._load_locks: dict[int, threading.Lock] = {}
        # Per led shard: when to restart its host if it stops (see _stopped).
        self._backoffs: dict[int, RestartBackoff] = {}
        self._restarting: set[int] = set()
        self._closing = threading.Event()
        self._warmer = spawn("groups-warm", self._keep_warm, warm_interval_s, start=False)
        # Consumer groups (KIP-848) follow the broker's topics.
        self._topics: TopicsImage | None = None
        self._watcher = None if topic_watcher is None else topic_watcher(self._on_topics)

    def start(self) -> GroupService:
        """Start tailing followed shards; leading ones load as the controller assigns them."""
        if self._watcher is not None:
            self._watcher.start()
        self._warmer.start()
        return self

    def _on_topics(self, image: TopicsImage) -> None:
        with self._lock:
            self._topics = image
            hosts = [h for h in self.hosts.values() if h.state is HostState.ACTIVE]
        for host in hosts:
            host.call_soon(_topics_event(image))

    def leads(self, partition: int) -> bool:
        """This daemon leads the shard and serves it now."""
        with self._lock:
            host = self.hosts.get(partition)
        return host is not None and host.state is HostState.ACTIVE

    # -- placement callbacks (from this daemon's node agent) ---------------------------

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
        if topic != self.topic:
            return
        with self._lock:
            self.followed.discard(partition)
            host = self.hosts.get(partition)
            if host is not None and host.state is not HostState.STOPPED:
                return  # a second load of a loaded shard is a no-op
            if not self._activating:
                self._activating_since = time.monotonic()
            self._activating.add(partition)
            self._backoffs[partition] = RestartBackoff()
            self.hosts[partition] = self._host(partition, state.leader_epoch).start()
        log.debug("immigrating group shard", partition=partition, leader_epoch=state.leader_epoch)

    def _activated(self, host: ShardHost) -> None:
        topics = self._topics
        if topics is not None:
            # The topics may have changed while it loaded (a no-op when they did not).
            host.call_soon(_topics_event(topics))
        with self._lock:
            partition = int(host.name.rpartition("-")[2])
            self._activating.discard(partition)
            self._activated_count += 1
            if self._activating:
                return
            count, self._activated_count = self._activated_count, 0
        log.info("group shards active", count=count, leading=len(self.hosts),
                 seconds=round(time.monotonic() - self._activating_since, 3),
                 since_launch_s=process_uptime_s())  # fmt: skip

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
        if topic != self.topic:
            return
        self._emigrate(partition)
        with self._lock:
            self.followed.add(partition)
        if self.settings.node_id not in state.isr:
            self._start_catching_up(partition)

    def on_leave_isr(self, topic: str, partition: int, state: PartitionValue) -> None:
        """Dropped from a followed shard's ISR under the same leader (this node fenced
        while paused or cut off): no new leadership would bring it back."""
        if topic == self.topic:
            log.info("rejoining a group shard's ISR", partition=partition)
            self._start_catching_up(partition)

    def _start_catching_up(self, partition: int) -> None:
        with self._lock:
            if partition in self._catching_up:
                return
            self._catching_up.add(partition)
        spawn(f"groups-catch-up-{partition}", self._catch_up, partition)

    def _catch_up(self, partition: int) -> None:
        try:
            self._catch_up_until_in_sync(partition)
        finally:
            with self._lock:
                self._catching_up.discard(partition)

    def _catch_up_until_in_sync(self, partition: int) -> None:
        """A follower is in sync once its cache holds the shard's log to the end.

        Tried again, less often each time, for as long as this daemon follows the shard
        from outside its ISR: a report refused because this node was still fenced (a
        daemon resumed after a pause) would otherwise leave it out of the ISR for good,
        and the shard offline as soon as its last in-sync replica failed."""
        backoff = RestartBackoff(first_s=0.2, max_s=5.0)
        failures = 0
        while not self._closing.is_set():
            try:
                self._recover([partition])
                if self.agent is not None:
                    self.agent.report_caught_up(self.topic, partition)
                return
            except Exception as exc:
                failures += 1
                if failures == 1:
                    log.warning("catching up a followed group shard failed; trying again",
                                partition=partition, error=str(exc))  # fmt: skip
            if self._closing.wait(backoff.next_delay_s()) or not self._outside_isr(partition):
                return

    def _outside_isr(self, partition: int) -> bool:
        """This daemon still follows the shard and is not in its ISR."""
        with self._lock:
            if partition not in self.followed:
                return False
        if self.agent is None:
            return False
        state = self.agent.replica_state(self.topic, partition)
        return state is not None and self.settings.node_id not in state.isr

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
        if topic != self.topic:
            return
        self._emigrate(partition)
        with self._lock:
            self.followed.discard(partition)

    def _emigrate(self, partition: int) -> None:
        with self._lock:
            host = self.hosts.pop(partition, None)
            self._activating.discard(partition)
            self._backoffs.pop(partition, None)
            self._restarting.discard(partition)
        if host is not None:
            log.info("emigrating group shard", partition=partition)
            host.stop(timeout_s=0)  # parked requests get NOT_COORDINATOR from the host

    # -- hosting ---------------------------------------------------------------------------

    def _host(self, partition: int, leader_epoch: int) -> ShardHost:
        parts = HostParts(
            store=self._cache.shard(ShardId(self.topic, partition)),
            identity=self._identity,
            policy=offsets_policy(self.settings.offsets_retention_ms),
            recover=lambda: self._recover([partition])[partition],
            make_shard=lambda: self._new_shard(partition),
            make_writer=lambda: self._writer(partition, leader_epoch),
            replies=self._processor.replies,
        )  # fmt: skip
        return ShardHost(
            f"offsets-{partition}", parts, unavailable=ErrorCode.NOT_COORDINATOR,
            observer=self._observer, processor=self._processor, on_active=self._activated,
            on_stopped=functools.partial(self._stopped, partition, leader_epoch),
        )  # fmt: skip

    def _stopped(
        self, partition: int, leader_epoch: int, host: ShardHost, failure: Exception | None
    ) -> None:
        """A host that stopped while this daemon still leads its shard starts again, soon
        and then less often if it keeps stopping (runtime/restarts.py). A fenced writer
        (a newer leader), a cancelled load and a strict poison stop are not restarted."""
        if failure is None or isinstance(failure, _FINAL_STOPS) or self._closing.is_set():
            return
        with self._lock:
            backoff = self._backoffs.get(partition)
            if self.hosts.get(partition) is not host or backoff is None:
                return  # moved away, or replaced, meanwhile
            delay_s = backoff.next_delay_s()
            self._restarting.add(partition)
        log.warning("group shard stopped; restarting it", partition=partition,
                    delay_s=delay_s, error=f"{type(failure).__name__}: {failure}")  # fmt: skip
        later(delay_s, self._restart, partition, leader_epoch, host,
              name=f"groups-restart-{partition}")  # fmt: skip

    def _restart(self, partition: int, leader_epoch: int, stopped: ShardHost) -> None:
        with self._lock:
            self._restarting.discard(partition)
            backoff = self._backoffs.get(partition)
            if self._closing.is_set() or self.hosts.get(partition) is not stopped or not backoff:
                return
            backoff.started()
            self.hosts[partition] = host = self._host(partition, leader_epoch)
        if self._observer is not None:
            self._observer.restarted(host.name, "stopped")
        host.start()

    def _new_shard(self, partition: int) -> GroupShard:
        shard = GroupShard(self.config, partition)
        if self._topics is not None:
            shard.on_topics(self._topics, 0)  # not active yet: only kept
        return shard

    def _writer(self, partition: int, leader_epoch: int) -> LeaderEpochWriter:
        """Opening the writer announces this daemon as the shard's leader (the fence)."""
        marker = shard_leader_record(
            leader_epoch, self.settings.node_id, self._incarnation, int(time.time() * 1000)
        )
        return LeaderEpochWriter(
            self._appends, self.topic, partition,
            epoch=leader_epoch, marker=encode_record(marker.key, marker.value),
        )  # fmt: skip

    def _recover(self, partitions: list[int]) -> dict[int, ShardLoad]:
        with self._lock:
            locks = [self._load_locks.setdefault(p, threading.Lock()) for p in sorted(partitions)]
        with contextlib.ExitStack() as held:
            for lock in locks:  # in partition order: two callers never deadlock
                held.enter_context(lock)
            return self._recovery.recover(partitions, self._identity)

    def dispatch(self, requests: list[tuple[int, Request]]) -> None:
        """Requests for shards, as (shard, request), from the listener's thread.

        The active shards' requests go to the processor in one hand-over.
        """
        agent = self.agent
        if agent is not None and not agent.leased():
            # Cut off from the controller past its node session: another daemon may lead
            # these shards by now, so nothing is answered from this one's memory.
            for _, request in requests:
                reject(request, ErrorCode.NOT_COORDINATOR, _LAPSED)
            return
        ready: list[tuple[ShardHost, object]] = []
        for partition, request in requests:
            host = self.hosts.get(partition)
            if host is None:
                reject(request, ErrorCode.NOT_COORDINATOR, f"shard {partition} is not led here")
            elif host.state is HostState.ACTIVE:
                ready.append((host, request))
            elif partition in self._restarting:
                reject(request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       f"shard {partition} is restarting")  # fmt: skip
            else:
                host.submit(request)  # answers: loading, or stopped
        if ready:
            self._processor.put_many(ready)

    def _keep_warm(self, interval_s: float) -> None:
        while not self._closing.wait(interval_s):
            with self._lock:
                followed = sorted(self.followed - set(self.hosts))
            if not followed:
                continue
            try:
                self._recover(followed)
            except Exception:
                log.exception("tailing followed group shards failed", partitions=followed)

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.close()
        with self._lock:
            hosts, self.hosts = list(self.hosts.values()), {}
        for host in hosts:
            host.stop()
        self._processor.close()
        self._appends.close()
        if self._warmer.is_alive():
            self._warmer.join(timeout=5)


def _topics_event(image: TopicsImage) -> Callable[[Shard, int], Result]:
    def event(shard: Shard, now_ms: int) -> Result:
        assert isinstance(shard, GroupShard)
        return shard.on_topics(image, now_ms)

    return event
