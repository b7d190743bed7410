"""Partition and replica state machines (Kafka's PartitionStateMachine and
ReplicaStateMachine).

Partition states are persisted: a partition record's ``state`` (NEW, ONLINE, OFFLINE), or
no record at all (NonExistent). Replica states live in memory only.

Each table maps a target state to the states it may be entered from (Kafka's
``validPreviousStates``). An invalid transition is a bug: it is logged at ERROR and
never applied.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from enum import Enum
from typing import Final, TypeAlias

from kafkacoord.codecs.models import PartitionState, PartitionValue

__all__ = [
    "PARTITION_TRANSITIONS",
    "REPLICA_TRANSITIONS",
    "PartitionPhase",
    "ReplicaState",
    "ReplicaStateMachine",
    "check_partition_transition",
    "derived_replica_state",
    "is_valid_partition_transition",
    "is_valid_replica_transition",
    "partition_phase",
]

log = logging.getLogger(__name__)

TP: TypeAlias = tuple[str, int]


class PartitionPhase(str, Enum):
    """Kafka's ``PartitionState``; the value is Kafka's name."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(str, Enum):
    """Kafka's ``ReplicaState``; the value is Kafka's name."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_P = PartitionPhase
PARTITION_TRANSITIONS: Final[Mapping[PartitionPhase, frozenset[PartitionPhase]]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}
"""Target partition state -> the states it may be entered from."""

_R = ReplicaState
REPLICA_TRANSITIONS: Final[Mapping[ReplicaState, frozenset[ReplicaState]]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Target replica state -> the states it may be entered from."""

_PHASE_OF_RECORD: Final[Mapping[PartitionState, PartitionPhase]] = {
    PartitionState.NEW: _P.NEW,
    PartitionState.ONLINE: _P.ONLINE,
    PartitionState.OFFLINE: _P.OFFLINE,
}


def partition_phase(value: PartitionValue | None) -> PartitionPhase:
    """The state machine state of a partition record (``None``: NonExistent)."""
    return _P.NON_EXISTENT if value is None else _PHASE_OF_RECORD[value.state]


def is_valid_partition_transition(source: PartitionPhase, target: PartitionPhase) -> bool:
    return source in PARTITION_TRANSITIONS[target]


def is_valid_replica_transition(source: ReplicaState, target: ReplicaState) -> bool:
    return source in REPLICA_TRANSITIONS[target]


def check_partition_transition(
    topic: str, partition: int, source: PartitionPhase, target: PartitionPhase
) -> bool:
    """Whether ``source -> target`` is valid; an invalid one is logged as the bug it is."""
    if source in PARTITION_TRANSITIONS[target]:
        return True
    log.error(
        "invalid partition state transition of %s-%d from %s to %s; not applied",
        topic, partition, source.value, target.value,
    )  # fmt: skip
    return False


def derived_replica_state(
    value: PartitionValue | None, node: int, live: Collection[int]
) -> ReplicaState:
    """A replica's state as it follows from the partition record and node liveness.

    Not a replica: NonExistent. A replica being added by a reassignment that has not
    joined the ISR yet: New. Otherwise Online on a live node and Offline on another.
    """
    if value is None or node not in value.replicas:
        return _R.NON_EXISTENT
    moving = value.reassignment
    if moving is not None and node in moving.adding_replicas and node not in value.isr:
        return _R.NEW
    return _R.ONLINE if node in live else _R.OFFLINE


class ReplicaStateMachine:
    """In-memory replica states.

    Online and Offline follow node liveness, so fencing a node costs nothing per replica:
    a replica's state is derived (:func:`derived_replica_state`) unless an explicit
    transition (deletion, a reassignment adding or removing it) set it. Explicit states
    are checked against :data:`REPLICA_TRANSITIONS` and dropped again by :meth:`prune`
    once the partition record agrees with them or no longer names the replica.
    """

    def __init__(self) -> None:
        self._explicit: dict[TP, dict[int, ReplicaState]] = {}

    def state(
        self,
        topic: str,
        partition: int,
        node: int,
        value: PartitionValue | None,
        live: Collection[int],
    ) -> ReplicaState:
        explicit = self._explicit.get((topic, partition))
        if explicit is not None and node in explicit:
            return explicit[node]
        return derived_replica_state(value, node, live)

    def transition(
        self,
        topic: str,
        partition: int,
        nodes: Iterable[int],
        target: ReplicaState,
        *,
        value: PartitionValue | None,
        live: Collection[int],
    ) -> list[int]:
        """Move each replica to ``target``; returns the nodes whose move was valid.

        ``value`` is the partition record the replicas' current state derives from.
        """
        done: list[int] = []
        for node in nodes:
            source = self.state(topic, partition, node, value, live)
            if source not in REPLICA_TRANSITIONS[target]:
                log.error(
                    "invalid replica state transition of %s-%d on node %d from %s to %s; "
                    "not applied", topic, partition, node, source.value, target.value,
                )  # fmt: skip
                continue
            self._explicit.setdefault((topic, partition), {})[node] = target
            done.append(node)
        return done

    def prune(
        self, topic: str, partition: int, value: PartitionValue | None, live: Collection[int]
    ) -> None:
        """Forget explicit states the record ``value`` (now replayed) makes redundant."""
        key = (topic, partition)
        explicit = self._explicit.get(key)
        if explicit is None:
            return
        if value is None:
            del self._explicit[key]
            return
        for node, state in list(explicit.items()):
            if node not in value.replicas or state is derived_replica_state(value, node, live):
                del explicit[node]
        if not explicit:
            del self._explicit[key]

    def has_explicit(self) -> bool:
        return bool(self._explicit)

    def explicit(self) -> dict[TP, dict[int, ReplicaState]]:
        """A copy of the explicitly set states (for inspection and tests)."""
        return {key: dict(states) for key, states in self._explicit.items()}

    def clear(self) -> None:
        self._explicit.clear()

    def snapshot(self) -> dict[TP, dict[int, ReplicaState]]:
        """For an undo: explicit states are few (replicas mid-deletion or mid-move)."""
        return self.explicit()

    def restore(self, snapshot: dict[TP, dict[int, ReplicaState]]) -> None:
        self._explicit = {key: dict(states) for key, states in snapshot.items()}
