"""A tiny runtime for the controller shard: handle / fire timers, then replay, like the host.

Every record the shard emits is replayed at once and kept in ``log``, so a "failover" is
a fresh shard that replays ``log`` and calls ``on_loaded``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from kafkacoord.codecs.models import (
    DecisionKey,
    DecisionValue,
    NodeKey,
    PartitionKey,
    PartitionValue,
    TopicKey,
    Trigger,
)
from kafkacoord.coordinator.controller.config import ControllerConfig
from kafkacoord.coordinator.controller.nodes import ISR_SHRINK_TIMER
from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import (
    Record,
    Reply,
    Request,
    RequestRef,
    Result,
    replay_result,
)

START_MS = 1_000_000


def quiet_config(**overrides: Any) -> ControllerConfig:
    """Defaults, without the auto rebalance timer unless asked for."""
    return ControllerConfig(**{"auto_leader_rebalance_enable": False, **overrides})


class Cluster:
    def __init__(
        self,
        config: ControllerConfig | None = None,
        *,
        seed: int = 7,
        now_ms: int = START_MS,
        log: list[Record] | None = None,
        controller_id: int = 1000,
    ) -> None:
        self.config = config if config is not None else quiet_config()
        self.now = now_ms
        self.log: list[Record] = []
        self.node_epochs: dict[int, int] = {}
        self._correlation = 0
        # The caller's authenticated principal (mutual TLS), as the dispatcher passes it.
        self.principal: str | None = None
        self.shard = ControllerShard(
            self.config, controller_id, f"controller-{controller_id}", rng=random.Random(seed)
        )
        for record in log or []:
            self.shard.replay(record)
            self.log.append(record)
        self.last = self._apply(self.shard.on_loaded(self.now))

    # -- driving ---------------------------------------------------------------------------

    def _apply(self, result: Result) -> Result:
        """The runtime's part: replay, append (to ``log``), then the post-commit actions."""
        replay_result(self.shard, result)
        self.log.extend(result.records)
        result.replies = result.committed()
        result.actions = []
        return result

    def call(self, body: Body, *, retry: bool = False) -> Reply:
        """One request; a ``retry`` keeps the last one's correlation id, as a client's does
        (so its decisions carry the same request id)."""
        if not retry:
            self._correlation += 1
        ref = RequestRef("test", self._correlation, principal=self.principal)
        request = Request(ref, type(body).__name__, body)
        self.last = self._apply(self.shard.handle(request, self.now))
        assert len(self.last.replies) == 1
        self.settle()
        return self.last.replies[0]

    def settle(self) -> list[Record]:
        """Run the ISR shrinks fencings scheduled once durable, as the runtime's next turns
        do; their records (``last`` stays the request's own result)."""
        records: list[Record] = []
        while any(
            isinstance(key, tuple) and key[0] == ISR_SHRINK_TIMER and deadline <= self.now
            for key, deadline in self.shard.timers.snapshot().items()
        ):
            records.extend(self._apply(self.shard.fire_timers(self.now)).records)
        return records

    def ok(self, body: Body, *, retry: bool = False) -> Any:
        reply = self.call(body, retry=retry)
        assert reply.error is ErrorCode.NONE, f"{reply.error.name}: {reply.message}"
        return reply.body

    def fails(self, body: Body, code: ErrorCode) -> str:
        reply = self.call(body)
        assert reply.error is code, f"expected {code.name}, got {reply.error.name}: {reply.message}"
        assert not self.last.records, "a failed request must write nothing"
        assert reply.message
        return reply.message

    def tick(self, advance_ms: int = 0) -> Result:
        self.now += advance_ms
        self.last = self._apply(self.shard.fire_timers(self.now))
        self.last.records.extend(self.settle())
        return self.last

    def run_for(self, duration_ms: int, alive: Iterable[int]) -> None:
        """Let time pass, the ``alive`` nodes heartbeating, firing timers as they come due."""
        nodes = list(alive)
        step = max(1, self.config.node_session_timeout_ms // 3)
        end = self.now + duration_ms
        while self.now < end:
            self.now = min(end, self.now + step)
            self.heartbeat_all(nodes)
            self.tick()

    def failover(self, **kwargs: Any) -> Cluster:
        """A new controller that loads everything written so far."""
        kwargs.setdefault("controller_id", 1001)
        successor = Cluster(self.config, now_ms=self.now, log=list(self.log), **kwargs)
        successor.node_epochs = dict(self.node_epochs)
        return successor

    # -- nodes -----------------------------------------------------------------------------

    def register(
        self,
        node: int,
        *,
        rack: str | None = None,
        roles: Sequence[str] = (),
        incarnation: str | None = None,
        heartbeat: bool = True,
    ) -> int:
        body = api.RegisterNode(
            node_id=node,
            incarnation=incarnation or f"inc-{node}",
            rack=rack,
            endpoints={"app": f"host{node}:9000"},
            roles=list(roles),
        )
        epoch: int = self.ok(body).node_epoch
        self.node_epochs[node] = epoch
        if heartbeat:
            self.heartbeat(node)
        return epoch

    def add_nodes(self, nodes: Iterable[int], **kwargs: Any) -> None:
        for node in nodes:
            self.register(node, **kwargs)

    def heartbeat(self, node: int) -> api.NodeHeartbeatResponse:
        reply: api.NodeHeartbeatResponse = self.ok(
            api.NodeHeartbeat(node_id=node, node_epoch=self.node_epochs[node])
        )
        return reply

    def heartbeat_all(self, nodes: Iterable[int]) -> None:
        for node in nodes:
            self.heartbeat(node)

    # -- topics ----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        *,
        assignment: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> api.CreateTopicResponse:
        if assignment is not None:
            body = api.CreateTopic(name=name, replica_assignment=assignment, configs=configs or {})
        else:
            body = api.CreateTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=configs or {},
            )
        reply: api.CreateTopicResponse = self.ok(body)
        return reply

    def p(self, topic: str, partition: int = 0) -> PartitionValue:
        value = self.shard.image.partition(topic, partition)
        assert value is not None, f"{topic}-{partition} does not exist"
        return value

    def alter_isr(self, topic: str, partition: int, isr: Sequence[int]) -> api.PartitionStateBody:
        value = self.p(topic, partition)
        reply: api.PartitionStateBody = self.ok(
            api.AlterPartition(
                node_id=value.leader,
                node_epoch=self.node_epochs[value.leader],
                topic=topic,
                partition=partition,
                leader_epoch=value.leader_epoch,
                partition_epoch=value.partition_epoch,
                new_isr=list(isr),
            )
        )
        return reply

    def caught_up(
        self, node: int, topic: str, partition: int = 0, *, caught_up: bool = True
    ) -> None:
        self.ok(
            api.ReplicaStatus(
                node_id=node,
                node_epoch=self.node_epochs[node],
                topic=topic,
                partition=partition,
                leader_epoch=self.p(topic, partition).leader_epoch,
                caught_up=caught_up,
            )
        )

    # -- records ---------------------------------------------------------------------------

    def partition_records(self, result: Result | None = None) -> list[PartitionValue | None]:
        result = result if result is not None else self.last
        return [
            r.value  # type: ignore[misc]
            for r in result.records
            if isinstance(r.key, PartitionKey)
        ]

    def record_keys(self, result: Result | None = None) -> list[object]:
        """The keys of what ``result`` changed (its decision records left out)."""
        result = result if result is not None else self.last
        return [r.key for r in result.records if not isinstance(r.key, DecisionKey)]

    def check(self) -> None:
        """Invariants that hold after every event."""
        image = self.shard.image
        image.check_indexes()
        for value in image.iter_partitions():
            name = f"{value.topic}-{value.partition}"
            assert len(set(value.replicas)) == len(value.replicas), name
            assert set(value.isr) <= set(value.replicas), (
                f"{name}: ISR {value.isr} ⊄ {value.replicas}"
            )
            assert len(set(value.isr)) == len(value.isr), name
            if value.leader >= 0:
                assert value.leader in value.isr, f"{name}: leader {value.leader} ∉ ISR {value.isr}"
            assert value.controller_epoch <= image.controller_epoch
        decided: set[DecisionKey] = set()
        for record in self.log:
            if isinstance(record.key, DecisionKey):
                decided.add(record.key)
            if (
                isinstance(record.key, (NodeKey, TopicKey, PartitionKey))
                and record.value is not None
            ):
                assert record.value.controller_epoch >= 0  # type: ignore[attr-defined]
            if isinstance(record.value, PartitionValue):
                # Every change names a decision written before it.
                assert record.value.cause is not None, record.value
                assert record.value.cause.decision in decided, record.value


def trigger_of(log: Iterable[Record], decision: DecisionKey | None) -> Trigger:
    """The trigger of ``decision``, from its record in ``log``."""
    [value] = [r.value for r in log if r.key == decision]
    assert isinstance(value, DecisionValue), value
    return value.trigger


def replayed(log: Iterable[Record]) -> Any:
    """The image that replaying ``log`` from scratch builds (what a loader sees)."""
    from kafkacoord.coordinator.controller.image import MetadataImage

    image = MetadataImage()
    for record in log:
        image.replay(record)
    return image
