"""Invariants after any sequence of operations (hypothesis).

- at most one leader per partition, a live (unfenced) replica in the ISR, ISR ⊆ replicas;
- leader and partition epochs never decrease; a change to leader, ISR or replicas bumps
  the partition epoch and a leader change bumps the leader epoch;
- a failed request writes nothing; every record carries the writer's controller epoch;
- replaying every record from scratch builds the live image (loading == live state).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.codecs.models import ControllerValue, PartitionKey, PartitionValue
from kafkacoord.coordinator.controller.config import ControllerConfig, InternalTopicSpec
from kafkacoord.coordinator.protocol import ErrorCode, TopicPartitionRef
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Record, Result

from .support import Cluster, replayed

NODES = [1, 2, 3, 4, 5]
TOPICS = ["a", "b", "c"]
CONFIG = ControllerConfig(
    node_session_timeout_ms=9000,
    leader_imbalance_check_interval_ms=20_000,
    max_rebalance_elections_per_run=2,
    max_concurrent_reassignments=2,
    internal_topics=(InternalTopicSpec("__kc_offsets", 2, 3),),
)

node = st.sampled_from(NODES)
topic = st.sampled_from(TOPICS)
partition = st.integers(0, 3)
operation = st.one_of(
    st.tuples(st.just("register"), node, st.booleans(), st.booleans()),
    st.tuples(st.just("heartbeat"), node),
    st.tuples(st.just("fence"), node),
    st.tuples(st.just("shutdown"), node),
    st.tuples(st.just("advance"), st.integers(0, 12_000)),
    st.tuples(st.just("create"), topic, st.integers(1, 4), st.integers(1, 3)),
    st.tuples(st.just("delete"), topic),
    st.tuples(st.just("add"), topic, st.integers(1, 2)),
    st.tuples(
        st.just("reassign"),
        topic,
        partition,
        st.none() | st.lists(node, min_size=1, max_size=4, unique=True),
    ),
    # A replica (by index) reports on itself; the leader sends a subset (bitmask) of replicas.
    st.tuples(st.just("status"), st.integers(0, 5), topic, partition, st.booleans()),
    st.tuples(st.just("alter"), topic, partition, st.integers(0, 63)),
    st.tuples(st.just("elect"), st.sampled_from(["preferred", "unclean"]), st.booleans()),
    st.tuples(st.just("failover")),
)


def apply(c: Cluster, op: tuple[Any, ...]) -> Cluster:
    c.last = Result()  # an operation that sends nothing writes nothing
    kind = op[0]
    epochs = c.node_epochs
    if kind == "register":
        incarnation = f"i{op[1]}-{len(c.log)}" if op[2] else f"i{op[1]}"
        roles = ["coordinator"] if op[1] >= 4 else []
        reply = c.call(api.RegisterNode(node_id=op[1], incarnation=incarnation, roles=roles))
        if reply.error is ErrorCode.NONE:
            epochs[op[1]] = reply.body.node_epoch  # type: ignore[union-attr]
            if op[3]:
                c.call(api.NodeHeartbeat(node_id=op[1], node_epoch=epochs[op[1]]))
    elif kind == "heartbeat":
        c.call(api.NodeHeartbeat(node_id=op[1], node_epoch=epochs.get(op[1], 1)))
    elif kind == "fence":
        c.call(api.FenceNode(node_id=op[1]))
    elif kind == "shutdown":
        c.call(api.ControlledShutdown(node_id=op[1], node_epoch=epochs.get(op[1], 1)))
    elif kind == "advance":
        c.tick(op[1])
    elif kind == "create":
        c.call(api.CreateTopic(name=op[1], num_partitions=op[2], replication_factor=op[3]))
    elif kind == "delete":
        c.call(api.DeleteTopic(name=op[1]))
    elif kind == "add":
        value = c.shard.image.topic(op[1])
        count = (value.num_partitions if value else 1) + op[2]
        c.call(api.CreatePartitions(topic=op[1], count=count))
    elif kind == "reassign":
        target = api.ReassignmentTarget(topic=op[1], partition=op[2], replicas=op[3])
        c.call(api.AlterReassignments(reassignments=[target]))
    elif kind == "status":
        current = c.shard.image.partition(op[2], op[3])
        if current is not None:
            member = current.replicas[op[1] % len(current.replicas)]
            c.call(
                api.ReplicaStatus(
                    node_id=member, node_epoch=epochs.get(member, 1), topic=op[2],
                    partition=op[3], leader_epoch=current.leader_epoch, caught_up=op[4],
                )
            )  # fmt: skip
    elif kind == "alter":
        current = c.shard.image.partition(op[1], op[2])
        if current is not None and current.leader >= 0:
            chosen = [r for i, r in enumerate(current.replicas) if op[3] >> i & 1]
            isr = [current.leader, *(n for n in chosen if n != current.leader)]
            c.call(
                api.AlterPartition(
                    node_id=current.leader, node_epoch=epochs.get(current.leader, 1),
                    topic=op[1], partition=op[2], leader_epoch=current.leader_epoch,
                    partition_epoch=current.partition_epoch, new_isr=isr,
                )
            )  # fmt: skip
    elif kind == "elect":
        refs = [TopicPartitionRef(topic=t, partition=0) for t in TOPICS] if op[2] else None
        c.call(api.ElectLeaders(election_type=op[1], partitions=refs))
    elif kind == "failover":
        epoch = c.shard.epoch
        c = c.failover(controller_id=c.shard.node_id + 1)
        assert c.shard.epoch == epoch + 1
    return c


def check_records(
    records: list[Record], epoch: int, last: dict[tuple[str, int], PartitionValue]
) -> None:
    for record in records:
        value = record.value
        if value is not None:
            written = value.epoch if isinstance(value, ControllerValue) else value.controller_epoch  # type: ignore[attr-defined]
            assert written == epoch
        if not isinstance(record.key, PartitionKey):
            continue
        key = (record.key.topic, record.key.partition)
        before = last.get(key)
        if value is None:
            last.pop(key, None)
            continue
        assert isinstance(value, PartitionValue)
        if before is not None:
            assert value.leader_epoch >= before.leader_epoch
            assert value.partition_epoch >= before.partition_epoch
            if value.leader != before.leader:
                assert value.leader_epoch > before.leader_epoch
            if (value.leader, value.isr, value.replicas, value.state) != (
                before.leader, before.isr, before.replicas, before.state,
            ):  # fmt: skip
                assert value.partition_epoch > before.partition_epoch
        last[key] = value


def check_state(c: Cluster) -> None:
    c.check()
    image = c.shard.image
    for value in image.iter_partitions():
        if value.leader >= 0:
            leader = image.node(value.leader)
            assert leader is not None and not leader.fenced, f"{value} led by a fenced node"
            assert value.leader in value.replicas
        if value.reassignment is not None and value.reassignment.step != "QUEUED":
            moving = value.reassignment
            assert set(value.replicas) == set(moving.target_replicas) | set(
                moving.original_replicas
            )
    active = [v for v in image.reassignments() if v.reassignment.step != "QUEUED"]  # type: ignore[union-attr]
    assert len(active) <= CONFIG.max_concurrent_reassignments


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(operation, min_size=10, max_size=80))
def test_invariants_hold_after_any_operations(ops: list[tuple[Any, ...]]) -> None:
    c = Cluster(CONFIG)
    c.add_nodes([1, 2, 3])
    c.add_nodes([4, 5], roles=["coordinator"])
    c.create("a", 3, 3)
    c.create("b", 2, 2)
    last: dict[tuple[str, int], PartitionValue] = {}
    for record in c.log:
        if isinstance(record.key, PartitionKey) and isinstance(record.value, PartitionValue):
            last[(record.key.topic, record.key.partition)] = record.value
    for op in ops:
        written = len(c.log)
        c = apply(c, op)
        if c.last.replies and c.last.replies[0].error is not ErrorCode.NONE:
            assert c.last.records == []
        check_records(c.log[written:], c.shard.epoch, last)
        check_state(c)
    assert replayed(c.log).snapshot() == c.shard.image.snapshot()
