"""Kafka's ``ReplicaManager.becomeLeaderOrFollower``, as a pure function of the metadata log.

For each partition record that names this node: ignore it when its controller
epoch is older than the newest seen (a stale controller), apply it only when
its leader epoch is newer than the one held, then tell the application whether
it now leads or follows. A partition that stops naming the node, or is deleted,
stops the replica. Both rules are the shared ones of :mod:`kafkacoord.codecs.fencing`:
the controller epoch fence, and the order of a partition's leader and partition epochs.

One transition is kafkacoord's own: a follower dropped from the ISR under the same
leader (fenced while paused, say) is told so, because here followers report themselves
caught up, and no new leadership would come to prompt the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from kafkacoord.codecs.fencing import ControllerEpochFence, EpochOrder, partition_epoch_order
from kafkacoord.codecs.models import (
    ControllerValue,
    PartitionKey,
    PartitionValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.runtime.shard import Record


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class PartitionHandler(Protocol):
    """What a service implements to host replicas."""

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None: ...

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None: ...

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None: ...

    # Optional: ``on_leave_isr(topic, partition, state)``, called when this follower is
    # dropped from the ISR under the same leadership; it reports itself caught up again.


@dataclass(frozen=True, slots=True)
class Transition:
    topic: str
    partition: int
    role: Role | None  # None: stop the replica
    state: PartitionValue | None
    deleted: bool = False
    left_isr: bool = False  # a follower dropped from the ISR, its leadership unchanged


class ReplicaManager:
    """Holds this node's replicas; ``apply`` returns the transitions a record causes."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.fence = ControllerEpochFence()
        self.replicas: dict[tuple[str, int], PartitionValue] = {}
        self.roles: dict[tuple[str, int], Role] = {}
        self.stale_ignored = 0

    @property
    def controller_epoch(self) -> int:
        """The newest controller epoch seen (-1 before any)."""
        return self.fence.epoch

    def apply(self, record: Record) -> list[Transition]:
        key, value = record.key, record.value
        if isinstance(value, ControllerValue):
            self.fence.admit(value)
            return []
        if isinstance(key, PartitionKey):
            if value is None:
                return self._stop((key.topic, key.partition), deleted=True)
            assert isinstance(value, PartitionValue)
            return self._partition(value)
        if isinstance(key, TopicKey) and isinstance(value, TopicValue) and value.deleting:
            return [t for tp in list(self.replicas) if tp[0] == key.name
                    for t in self._stop(tp, deleted=True)]  # fmt: skip
        return []

    def _partition(self, state: PartitionValue) -> list[Transition]:
        # A decision proves its controller's epoch, so it raises the fence as that
        # controller's record would (compaction may have dropped the record).
        if not self.fence.admit_epoch(state.controller_epoch, announces=True):
            self.stale_ignored += 1
            return []
        tp = (state.topic, state.partition)
        if self.node_id not in state.replicas:
            return self._stop(tp, deleted=False)
        held = self.replicas.get(tp)
        if held is not None:
            order = partition_epoch_order(state.leader_epoch, state.partition_epoch,
                                          held.leader_epoch, held.partition_epoch)  # fmt: skip
            if order is not EpochOrder.NEWER_LEADER_EPOCH:
                # An older leadership is ignored; the same one with a newer ISR or
                # replicas is kept, with a callback only when it drops this follower.
                if order is not EpochOrder.NEWER_PARTITION_EPOCH:
                    return []
                self.replicas[tp] = state
                dropped = self.node_id in held.isr and self.node_id not in state.isr
                if dropped and self.roles.get(tp) is Role.FOLLOWER:
                    return [Transition(state.topic, state.partition, Role.FOLLOWER, state,
                                       left_isr=True)]  # fmt: skip
                return []
        self.replicas[tp] = state
        role = Role.LEADER if state.leader == self.node_id else Role.FOLLOWER
        self.roles[tp] = role
        return [Transition(state.topic, state.partition, role, state)]

    def _stop(self, tp: tuple[str, int], *, deleted: bool) -> list[Transition]:
        if self.replicas.pop(tp, None) is None:
            return []
        self.roles.pop(tp, None)
        return [Transition(tp[0], tp[1], None, None, deleted)]

    def current(self) -> list[Transition]:
        """The transitions that bring a fresh application to the present state."""
        return [Transition(tp[0], tp[1], self.roles[tp], state)
                for tp, state in sorted(self.replicas.items())]  # fmt: skip


def deliver(handler: PartitionHandler, transition: Transition) -> None:
    if transition.left_isr:
        on_leave_isr = getattr(handler, "on_leave_isr", None)
        if on_leave_isr is not None:
            on_leave_isr(transition.topic, transition.partition, transition.state)
    elif transition.role is Role.LEADER:
        assert transition.state is not None
        handler.on_become_leader(transition.topic, transition.partition, transition.state)
    elif transition.role is Role.FOLLOWER:
        assert transition.state is not None
        handler.on_become_follower(transition.topic, transition.partition, transition.state)
    else:
        handler.on_stop_replica(transition.topic, transition.partition, transition.deleted)
