"""Partition and replica state machines: Kafka's transition tables, enforced."""

from __future__ import annotations

import logging
from itertools import product

import pytest

from kafkacoord.codecs.models import (
    Cause,
    DecisionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
)
from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.states import (
    PartitionPhase,
    ReplicaState,
    ReplicaStateMachine,
    check_partition_transition,
    derived_replica_state,
    is_valid_partition_transition,
    is_valid_replica_transition,
    partition_phase,
)
from kafkacoord.coordinator.runtime.shard import Record

P = PartitionPhase
R = ReplicaState

# Kafka's validPreviousStates, written out pair by pair.
VALID_PARTITION = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
VALID_REPLICA = {
    (R.NON_EXISTENT, R.NEW),
    *((s, R.ONLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    *((s, R.OFFLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE),
    (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


@pytest.mark.parametrize(("source", "target"), list(product(P, P)))
def test_partition_transition_table(source: PartitionPhase, target: PartitionPhase) -> None:
    assert is_valid_partition_transition(source, target) == ((source, target) in VALID_PARTITION)


@pytest.mark.parametrize(("source", "target"), list(product(R, R)))
def test_replica_transition_table(source: ReplicaState, target: ReplicaState) -> None:
    assert is_valid_replica_transition(source, target) == ((source, target) in VALID_REPLICA)


def test_invalid_partition_transition_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert not check_partition_transition("t", 3, P.ONLINE, P.NON_EXISTENT)
        assert check_partition_transition("t", 3, P.OFFLINE, P.NON_EXISTENT)
    [entry] = caplog.records
    assert entry.levelno == logging.ERROR
    assert "t-3" in entry.getMessage()
    assert "OnlinePartition" in entry.getMessage()


def _value(
    state: PartitionState = PartitionState.ONLINE,
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] = (1, 2, 3),
    leader: int = 1,
    reassignment: Reassignment | None = None,
) -> PartitionValue:
    return PartitionValue("t", 0, state, replicas, isr, leader, 0, 0, 0, 0, reassignment)


def test_partition_phase_of_records() -> None:
    assert partition_phase(None) is P.NON_EXISTENT
    assert partition_phase(_value(PartitionState.NEW)) is P.NEW
    assert partition_phase(_value(PartitionState.ONLINE)) is P.ONLINE
    assert partition_phase(_value(PartitionState.OFFLINE)) is P.OFFLINE


def test_derived_replica_states() -> None:
    moving = Reassignment((1, 2, 3), (4, 2, 3), (4,), (1,), "A2", 0)
    value = _value(replicas=(4, 2, 3, 1), reassignment=moving)
    live = {1, 2, 4}
    assert derived_replica_state(None, 1, live) is R.NON_EXISTENT
    assert derived_replica_state(value, 9, live) is R.NON_EXISTENT
    assert derived_replica_state(value, 4, live) is R.NEW  # being added, not in the ISR yet
    assert derived_replica_state(value, 2, live) is R.ONLINE
    assert derived_replica_state(value, 3, live) is R.OFFLINE  # node 3 is not live
    joined = _value(replicas=(4, 2, 3, 1), isr=(1, 2, 3, 4), reassignment=moving)
    assert derived_replica_state(joined, 4, live) is R.ONLINE


def test_replica_state_machine_applies_valid_and_rejects_invalid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine = ReplicaStateMachine()
    value = _value()
    live = {1, 2, 3}
    assert machine.transition("t", 0, [1, 2], R.OFFLINE, value=value, live=live) == [1, 2]
    assert machine.state("t", 0, 1, value, live) is R.OFFLINE
    assert machine.state("t", 0, 3, value, live) is R.ONLINE  # derived
    with caplog.at_level(logging.ERROR):
        # Online -> ReplicaDeletionStarted skips Offline: rejected, logged, not applied.
        assert machine.transition("t", 0, [3], R.DELETION_STARTED, value=value, live=live) == []
    assert "invalid replica state transition" in caplog.text
    assert machine.state("t", 0, 3, value, live) is R.ONLINE
    for state in (R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
        assert machine.transition("t", 0, [1], state, value=value, live=live) == [1]
    assert machine.state("t", 0, 1, value, live) is R.NON_EXISTENT


def test_replica_state_machine_ineligible_then_retry() -> None:
    machine = ReplicaStateMachine()
    value = _value()
    live = {2, 3}
    assert machine.transition("t", 0, [1], R.OFFLINE, value=value, live=live) == [1]
    assert machine.transition("t", 0, [1], R.DELETION_STARTED, value=value, live=live) == [1]
    assert machine.transition("t", 0, [1], R.DELETION_INELIGIBLE, value=value, live=live) == [1]
    assert machine.transition("t", 0, [1], R.OFFLINE, value=value, live=live) == [1]
    assert machine.transition("t", 0, [1], R.DELETION_STARTED, value=value, live=live) == [1]


def test_prune_drops_states_the_record_agrees_with() -> None:
    machine = ReplicaStateMachine()
    value = _value()
    live = {1, 2, 3}
    machine.transition("t", 0, [1], R.OFFLINE, value=value, live=live)
    machine.transition("t", 0, [2], R.OFFLINE, value=value, live=live)
    # Node 2 is fenced now: its derived state is Offline as well, node 1 left the replicas.
    machine.prune("t", 0, _value(replicas=(2, 3), isr=(3,), leader=3), {1, 3})
    assert machine.explicit() == {}
    machine.transition("t", 0, [3], R.OFFLINE, value=value, live=live)
    assert machine.has_explicit()
    machine.prune("t", 0, None, live)  # tombstone
    assert not machine.has_explicit()


CAUSE = Cause(DecisionKey(0, 0))


def test_batch_rejects_invalid_partition_transitions(caplog: pytest.LogCaptureFixture) -> None:
    from kafkacoord.codecs.models import PartitionKey

    image = MetadataImage()
    image.replay(Record(PartitionKey("t", 0), _value()))
    batch = Batch(image, 0, 5)
    with caplog.at_level(logging.ERROR):
        # Online -> NonExistent is not allowed: a partition goes offline first.
        assert not batch.delete_partition("t", 0)
        # NonExistent -> Online skips New.
        fresh = PartitionValue(
            "t", 1, PartitionState.ONLINE, (1,), (1,), 1, 0, 0, 0, 0, cause=CAUSE
        )
        assert not batch.put_partition(fresh)
    assert batch.records == []
    assert caplog.text.count("invalid partition state transition") == 2
    # Through New it is fine, and a partition created NEW may stay NEW.
    assert batch.put_partition(fresh, via=P.NEW)
    created_new = PartitionValue("t", 2, PartitionState.NEW, (1,), (), -1, 0, 0, 0, 0, cause=CAUSE)
    assert batch.put_partition(created_new, via=P.NEW)
    offline = PartitionValue(
        "t", 0, PartitionState.OFFLINE, (1, 2, 3), (1, 2, 3), -1, 1, 1, 0, 0, cause=CAUSE
    )
    assert batch.put_partition(offline)
    assert batch.delete_partition("t", 0)
    assert len(batch.records) == 4
    assert batch.records[-1].value is None
