"""ISR changes: AlterPartition from the leader, ReplicaStatus from followers, with epochs."""

from __future__ import annotations

from typing import Any

import pytest

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.add_nodes([1, 2, 3, 4])
    cluster.create("t", assignment={0: [1, 2, 3]})
    return cluster


def alter(c: Cluster, **overrides: Any) -> api.AlterPartition:
    value = c.p("t")
    fields: dict[str, Any] = {
        "node_id": value.leader,
        "node_epoch": 1,
        "topic": "t",
        "partition": 0,
        "leader_epoch": value.leader_epoch,
        "partition_epoch": value.partition_epoch,
        "new_isr": [1, 2],
    }
    fields.update(overrides)
    return api.AlterPartition(**fields)


def status(c: Cluster, node: int, *, caught_up: bool, **overrides: Any) -> api.ReplicaStatus:
    fields: dict[str, Any] = {
        "node_id": node,
        "node_epoch": c.node_epochs.get(node, 1),
        "topic": "t",
        "partition": 0,
        "leader_epoch": c.p("t").leader_epoch,
        "caught_up": caught_up,
    }
    fields.update(overrides)
    return api.ReplicaStatus(**fields)


# -- AlterPartition ---------------------------------------------------------------------------


def test_alter_partition_shrinks_and_expands(c: Cluster) -> None:
    reply = c.ok(alter(c, new_isr=[1, 3]))
    assert reply == api.PartitionStateBody(
        topic="t", partition=0, leader=1, leader_epoch=0, partition_epoch=1,
        replicas=[1, 2, 3], isr=[1, 3],
    )  # fmt: skip
    assert c.p("t").isr == (1, 3)
    reply = c.ok(alter(c, new_isr=[1, 3, 2]))
    assert (reply.isr, reply.partition_epoch, reply.leader_epoch) == ([1, 3, 2], 2, 0)


def test_alter_partition_with_the_same_isr_writes_nothing(c: Cluster) -> None:
    reply = c.ok(alter(c, new_isr=[1, 2, 3]))
    assert c.last.records == [] and reply.partition_epoch == 0


def test_stale_leader_epoch_is_fenced(c: Cluster) -> None:
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    c.caught_up(1, "t")
    # Node 2 leads now (leader epoch 1); an AlterPartition naming epoch 0 is stale.
    message = c.fails(alter(c, node_id=2, leader_epoch=0), ErrorCode.FENCED_LEADER_EPOCH)
    assert "stale leader epoch 0" in message
    message = c.fails(alter(c, node_id=2, leader_epoch=5), ErrorCode.FENCED_LEADER_EPOCH)
    assert "unknown leader epoch 5" in message


def test_stale_partition_epoch_is_rejected(c: Cluster) -> None:
    c.ok(alter(c, new_isr=[1, 2]))
    message = c.fails(alter(c, partition_epoch=0, new_isr=[1]), ErrorCode.INVALID_UPDATE_VERSION)
    assert "partition epoch 0" in message


def test_only_the_leader_may_alter(c: Cluster) -> None:
    message = c.fails(alter(c, node_id=2), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert "not the leader" in message


def test_isr_members_must_be_live_replicas(c: Cluster) -> None:
    assert "not replicas" in c.fails(alter(c, new_isr=[1, 4]), ErrorCode.INELIGIBLE_REPLICA)
    c.ok(alter(c, new_isr=[1, 2]))
    c.ok(api.FenceNode(node_id=3))
    message = c.fails(alter(c, new_isr=[1, 2, 3]), ErrorCode.INELIGIBLE_REPLICA)
    assert "fenced or shutting down" in message


def test_malformed_isrs(c: Cluster) -> None:
    c.fails(alter(c, new_isr=[1, 1]), ErrorCode.INVALID_REQUEST)
    c.fails(alter(c, new_isr=[2, 3]), ErrorCode.INVALID_REQUEST)  # without the leader


def test_alter_partition_needs_a_current_node_epoch_and_a_partition(c: Cluster) -> None:
    c.fails(alter(c, node_epoch=9), ErrorCode.STALE_BROKER_EPOCH)
    c.fails(alter(c, partition=5), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    c.fails(alter(c, topic="x"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


# -- ReplicaStatus ------------------------------------------------------------------------------


def test_follower_falls_behind_and_catches_up(c: Cluster) -> None:
    c.ok(status(c, 2, caught_up=False))
    value = c.p("t")
    assert (value.isr, value.partition_epoch, value.leader_epoch) == ((1, 3), 1, 0)
    c.ok(status(c, 2, caught_up=False))
    assert c.last.records == []
    c.ok(status(c, 2, caught_up=True))
    assert c.p("t").isr == (1, 3, 2)
    c.ok(status(c, 2, caught_up=True))
    assert c.last.records == []
    c.ok(status(c, 1, caught_up=True))  # the leader is always caught up
    assert c.last.records == []


def test_replica_status_errors(c: Cluster) -> None:
    c.fails(status(c, 4, caught_up=True), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    c.fails(status(c, 2, caught_up=True, leader_epoch=3), ErrorCode.FENCED_LEADER_EPOCH)
    c.fails(status(c, 2, caught_up=True, node_epoch=2), ErrorCode.STALE_BROKER_EPOCH)
    c.fails(status(c, 2, caught_up=True, partition=3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    c.fails(status(c, 1, caught_up=False), ErrorCode.INVALID_REQUEST)


def test_a_fenced_follower_cannot_rejoin(c: Cluster) -> None:
    c.ok(api.FenceNode(node_id=3))
    assert c.p("t").isr == (1, 2)
    message = c.fails(status(c, 3, caught_up=True), ErrorCode.INELIGIBLE_REPLICA)
    assert "fenced" in message


def test_no_catching_up_without_a_leader() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.ok(status(c, 2, caught_up=False))
    c.ok(api.FenceNode(node_id=1))
    assert c.p("t").leader == -1
    c.fails(status(c, 2, caught_up=True), ErrorCode.LEADER_NOT_AVAILABLE)
