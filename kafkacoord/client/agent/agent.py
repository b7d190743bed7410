"""The node agent a service embeds: registration, heartbeats, replica callbacks, ISR reports.

    agent = NodeAgent(bootstrap, node_id=3, handler=my_service, rack="r1")
    agent.start()
    ...
    agent.report_caught_up("orders", 4)      # a follower caught up with its leader
    agent.controlled_shutdown()              # move leaderships away first
    agent.close()

Callbacks run on one thread, in metadata order. Nothing is called back for
history: the agent first reads the metadata log to its end, then announces the
present state, then follows live.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

import structlog

from kafkacoord.client.connector import shared_client
from kafkacoord.client.errors import RequestError
from kafkacoord.client.follower import MetadataFollower
from kafkacoord.client.routes import CONTROLLER
from kafkacoord.codecs.models import NodeKey, NodeValue, PartitionValue
from kafkacoord.coordinator.protocol import ALL_APIS, Body, ErrorCode, TopicPartitionRef
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.errors import BrokerUnavailableError
from kafkacoord.storage.watermarks import EndOffsetProbe
from kafkacoord.wire import ClientTls

from .lease import NodeLease
from .replicas import PartitionHandler, ReplicaManager, Transition, deliver

log = structlog.get_logger(__name__)


class NodeAgent:
    """The node side of the controller, embedded in a service process (see the module
    docstring)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        node_id: int,
        handler: PartitionHandler,
        rack: str | None = None,
        endpoints: Mapping[str, str] | None = None,
        roles: Sequence[str] = (),
        topic_prefix: str = "__kc_",
        tls: ClientTls | None = None,
        heartbeat_interval_ms: int = 2000,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.node_id = node_id
        self.incarnation = uuid.uuid4().hex
        self.node_epoch = -1
        self.fenced = True
        self.shutting_down = False
        self._bootstrap = bootstrap
        self._handler = handler
        self._rack = rack
        self._endpoints = dict(endpoints or {})
        self._roles = list(roles)
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._timeout_s = request_timeout_s
        self._replicas = ReplicaManager(node_id)
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._client = shared_client(bootstrap, topic_prefix=topic_prefix, tls=tls)
        self._follower: MetadataFollower | None = None
        self._heartbeats: threading.Thread | None = None
        self.lease = NodeLease(read_to=self._metadata_read_to)
        # Read on the heartbeat thread, so bounded by the interval: heartbeats go on.
        self._log_ends = EndOffsetProbe(
            bootstrap, client_id=f"kafkacoord-node-{node_id}-ends",
            timeout_s=max(self._heartbeat_s, 1.0),
        )  # fmt: skip

    # -- lifecycle ---------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> NodeAgent:
        """Register (waiting for a controller), then follow metadata and heartbeat."""
        self._register(timeout_s)
        self._follower = MetadataFollower(
            self._bootstrap, self._client.topics.metadata, self._on_record,
            client_id=f"kafkacoord-node-{self.node_id}-{self.incarnation[:8]}",
            on_caught_up=self._on_caught_up,
        )  # fmt: skip
        self._heartbeats = threading.Thread(
            target=self._heartbeat_loop, name=f"node-{self.node_id}-heartbeat", daemon=True
        )
        self._heartbeats.start()
        return self

    def wait_caught_up(self, timeout_s: float) -> bool:
        return self._follower is not None and self._follower.wait_caught_up(timeout_s)

    def close(self) -> None:
        self._closing.set()
        if self._heartbeats is not None:
            self._heartbeats.join(timeout=5)
        if self._follower is not None:
            self._follower.close()
        self._log_ends.close()
        self._client.close()

    # -- controller requests -------------------------------------------------------

    def _call(self, name: str, body: Body, timeout_s: float | None = None) -> Body:
        response = ALL_APIS[name].response
        return self._client.call(CONTROLLER, body, response, timeout_s=timeout_s or self._timeout_s)

    def _register(self, timeout_s: float) -> None:
        reply = self._call(
            "RegisterNode",
            api.RegisterNode(
                node_id=self.node_id,
                incarnation=self.incarnation,
                rack=self._rack,
                endpoints=self._endpoints,
                roles=self._roles,
            ),
            timeout_s,
        )
        assert isinstance(reply, api.RegisterNodeResponse)
        self.node_epoch = reply.node_epoch
        log.info("node registered", node_id=self.node_id, node_epoch=self.node_epoch)

    def _heartbeat_loop(self) -> None:
        # The first heartbeat goes out at once: a registered node is fenced until then.
        first = True
        failures = 0  # in a row: the first is logged, then the recovery
        while first or not self._closing.wait(self._heartbeat_s):
            first = False
            sent = self.lease.now()
            try:
                reply = self._call(
                    "NodeHeartbeat",
                    api.NodeHeartbeat(node_id=self.node_id, node_epoch=self.node_epoch),
                    timeout_s=max(self._heartbeat_s * 2, 2.0),
                )
            except RequestError as exc:
                if exc.code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_NOT_AVAILABLE):
                    # The controller forgot us (or we it): register again.
                    self._try(lambda: self._register(self._timeout_s))
                elif failures == 0:
                    log.warning("node heartbeat failed; retrying", node_id=self.node_id,
                                error=str(exc))  # fmt: skip
                failures += 1
                continue
            if failures:
                log.info("node heartbeats answered again", node_id=self.node_id, failed=failures)
                failures = 0
            assert isinstance(reply, api.NodeHeartbeatResponse)
            if not self.lease.answered(
                sent, fenced=reply.fenced, session_timeout_ms=reply.session_timeout_ms,
                controller_epoch=reply.controller_epoch,
                known_epoch=self._replicas.controller_epoch,
            ):  # fmt: skip
                log.info("heartbeat answered by a deposed controller; ignored",
                         node_id=self.node_id, epoch=reply.controller_epoch)  # fmt: skip
                continue
            self.fenced = reply.fenced
            self.shutting_down = reply.shutting_down
            if self.lease.needs_log_end():
                self._read_log_end()

    @property
    def controller_epoch(self) -> int:
        """The newest controller epoch that answered this node's heartbeats."""
        return self.lease.controller_epoch

    def _metadata_read_to(self) -> int:
        follower = self._follower
        return 0 if follower is None else follower.read_to

    def _read_log_end(self) -> None:
        """The metadata log's end, read after a renewal of a lapsed lease (see
        :mod:`.lease`); tried again after the next heartbeat if the broker fails it."""
        topic = self._client.topics.metadata
        try:
            end = self._log_ends.latest([(topic, 0)])[(topic, 0)]
        except BrokerUnavailableError as exc:
            log.warning("reading the metadata log's end failed; the lease waits",
                        node_id=self.node_id, error=str(exc))  # fmt: skip
            return
        self.lease.log_end(end)
        log.info("node lease granted again; it holds once metadata is read to its end",
                 node_id=self.node_id, log_end=end, read_to=self._metadata_read_to())  # fmt: skip

    def leased(self) -> bool:
        """Whether what this node leads is still its own (see :mod:`.lease`): an answer
        from memory is current only while this holds."""
        return self.lease.held()

    @staticmethod
    def _try(fn: Callable[[], object]) -> None:
        try:
            fn()
        except RequestError as exc:
            log.warning("node request failed", error=str(exc))

    def report_caught_up(
        self, topic: str, partition: int, *, leader_epoch: int | None = None
    ) -> None:
        """This follower has caught up with its leader: the controller may add it to the ISR.

        ``leader_epoch``: the leadership it caught up with (default: the newest this node
        has read). The controller refuses the report once that leadership is over, so a
        follower that copied from a deposed leader cannot join its successor's ISR."""
        self._report(topic, partition, caught_up=True, leader_epoch=leader_epoch)

    def report_fell_behind(
        self, topic: str, partition: int, *, leader_epoch: int | None = None
    ) -> None:
        self._report(topic, partition, caught_up=False, leader_epoch=leader_epoch)

    def _report(
        self, topic: str, partition: int, *, caught_up: bool, leader_epoch: int | None
    ) -> None:
        state = self.replica_state(topic, partition)
        if state is None:
            raise KeyError(f"node {self.node_id} holds no replica of {topic}-{partition}")
        self._call(
            "ReplicaStatus",
            api.ReplicaStatus(
                node_id=self.node_id,
                node_epoch=self.node_epoch,
                topic=topic,
                partition=partition,
                leader_epoch=state.leader_epoch if leader_epoch is None else leader_epoch,
                caught_up=caught_up,
            ),
        )

    def alter_isr(
        self, topic: str, partition: int, new_isr: Sequence[int]
    ) -> api.PartitionStateBody:
        """As leader, set the ISR (AlterPartition with the epochs this node holds)."""
        state = self.replica_state(topic, partition)
        if state is None:
            raise KeyError(f"node {self.node_id} holds no replica of {topic}-{partition}")
        reply = self._call(
            "AlterPartition",
            api.AlterPartition(
                node_id=self.node_id,
                node_epoch=self.node_epoch,
                topic=topic,
                partition=partition,
                leader_epoch=state.leader_epoch,
                partition_epoch=state.partition_epoch,
                new_isr=list(new_isr),
            ),
        )
        assert isinstance(reply, api.PartitionStateBody)
        return reply

    def controlled_shutdown(self, timeout_s: float = 30.0) -> list[TopicPartitionRef]:
        """Move this node's leaderships away; returns partitions nobody else could take."""
        reply = self._call(
            "ControlledShutdown",
            api.ControlledShutdown(node_id=self.node_id, node_epoch=self.node_epoch),
            timeout_s,
        )
        assert isinstance(reply, api.ControlledShutdownResponse)
        return reply.remaining

    # -- metadata ----------------------------------------------------------------------

    def replica_state(self, topic: str, partition: int) -> PartitionValue | None:
        with self._lock:
            return self._replicas.replicas.get((topic, partition))

    def led_partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(
                tp for tp, s in self._replicas.replicas.items() if s.leader == self.node_id
            )

    def _on_record(self, record: Record, offset: int) -> None:
        value = record.value
        mine = isinstance(record.key, NodeKey) and record.key.node_id == self.node_id
        if mine and isinstance(value, NodeValue) and value.incarnation == self.incarnation:
            self.fenced = value.fenced
        with self._lock:
            transitions = self._replicas.apply(record)
        if self._follower is not None and self._follower.caught_up.is_set():
            self._deliver(transitions)

    def _on_caught_up(self) -> None:
        with self._lock:
            present = self._replicas.current()
        self._deliver(present)

    def _deliver(self, transitions: list[Transition]) -> None:
        for transition in transitions:
            try:
                deliver(self._handler, transition)
            except Exception:
                log.exception("replica callback failed", topic=transition.topic,
                              partition=transition.partition)  # fmt: skip
