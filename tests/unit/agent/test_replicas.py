"""Kafka's becomeLeaderOrFollower rules, on the node side."""

from __future__ import annotations

from kafkacoord.client.agent import ReplicaManager, Role
from kafkacoord.client.agent.replicas import deliver
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.runtime.shard import Record


def part(
    leader: int,
    leader_epoch: int,
    *,
    epoch: int = 1,
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    partition_epoch: int | None = None,
) -> Record:
    value = PartitionValue(
        "t", 0, PartitionState.ONLINE, replicas, isr or replicas, leader, leader_epoch,
        partition_epoch if partition_epoch is not None else leader_epoch, 0, epoch,
    )  # fmt: skip
    return Record(PartitionKey("t", 0), value)


def controller(epoch: int) -> Record:
    return Record(ControllerKey(), ControllerValue(epoch, 1, "x", 0))


def test_leader_then_follower_on_newer_leader_epochs() -> None:
    node = ReplicaManager(1)
    [t] = node.apply(part(1, 1))
    assert (t.role, t.state.leader) == (Role.LEADER, 1)  # type: ignore[union-attr]
    [t] = node.apply(part(2, 2))
    assert t.role is Role.FOLLOWER


def test_same_or_older_leader_epoch_is_not_applied() -> None:
    node = ReplicaManager(1)
    node.apply(part(1, 5))
    assert node.apply(part(2, 5)) == []
    assert node.apply(part(2, 4)) == []
    assert node.replicas[("t", 0)].leader == 1


def test_isr_change_without_leader_change_updates_silently() -> None:
    node = ReplicaManager(1)
    node.apply(part(1, 3, partition_epoch=3))
    assert node.apply(part(1, 3, isr=(1, 2), partition_epoch=4)) == []
    assert node.replicas[("t", 0)].isr == (1, 2)


def test_a_follower_dropped_from_the_isr_is_told_and_a_leader_is_not() -> None:
    node = ReplicaManager(1)
    node.apply(part(2, 3, partition_epoch=3))
    [t] = node.apply(part(2, 3, isr=(2, 3), partition_epoch=4))
    assert (t.role, t.left_isr, t.state.isr) == (Role.FOLLOWER, True, (2, 3))  # type: ignore[union-attr]
    # Still out, or back in: nothing more to tell.
    assert node.apply(part(2, 3, isr=(2,), partition_epoch=5)) == []
    assert node.apply(part(2, 3, partition_epoch=6)) == []
    leader = ReplicaManager(2)
    leader.apply(part(2, 3, partition_epoch=3))
    assert leader.apply(part(2, 3, isr=(1, 3), partition_epoch=4)) == []


def test_on_leave_isr_is_called_only_when_the_handler_has_it() -> None:
    node = ReplicaManager(1)
    node.apply(part(2, 3, partition_epoch=3))
    [t] = node.apply(part(2, 3, isr=(2, 3), partition_epoch=4))
    calls: list[tuple[str, int, tuple[int, ...]]] = []

    class Plain:
        def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
            calls.append(("leader", partition, state.isr))

        def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
            calls.append(("follower", partition, state.isr))

        def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
            calls.append(("stop", partition, ()))

    class Reporting(Plain):
        def on_leave_isr(self, topic: str, partition: int, state: PartitionValue) -> None:
            calls.append(("left", partition, state.isr))

    deliver(Plain(), t)
    assert calls == []
    deliver(Reporting(), t)
    assert calls == [("left", 0, (2, 3))]


def test_stale_controller_epoch_is_ignored() -> None:
    node = ReplicaManager(1)
    node.apply(controller(7))
    assert node.apply(part(1, 9, epoch=6)) == []
    assert node.stale_ignored == 1
    assert ("t", 0) not in node.replicas
    [t] = node.apply(part(1, 9, epoch=7))
    assert t.role is Role.LEADER


def test_records_for_other_nodes_do_nothing_and_removal_stops_the_replica() -> None:
    node = ReplicaManager(9)
    assert node.apply(part(1, 1)) == []
    node.apply(part(1, 1, replicas=(1, 9)))
    [t] = node.apply(part(1, 2, replicas=(1, 2)))
    assert (t.role, t.deleted) == (None, False)
    assert node.replicas == {}


def test_deletion_stops_with_delete() -> None:
    node = ReplicaManager(1)
    node.apply(part(1, 1))
    topic = TopicValue("t", "id", 1, 3, 0, 1, deleting=True)
    [t] = node.apply(Record(TopicKey("t"), topic))
    assert (t.role, t.deleted) == (None, True)
    assert node.apply(Record(PartitionKey("t", 0), None)) == []


def test_tombstone_stops_a_held_replica() -> None:
    node = ReplicaManager(2)
    node.apply(part(1, 1))
    [t] = node.apply(Record(PartitionKey("t", 0), None))
    assert t.deleted


def test_current_replays_the_present() -> None:
    node = ReplicaManager(2)
    node.apply(part(1, 1))
    node.apply(part(2, 2))
    [t] = node.current()
    assert (t.role, t.state.leader_epoch) == (Role.LEADER, 2)  # type: ignore[union-attr]
