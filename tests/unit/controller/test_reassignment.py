"""Partition reassignment (KIP-455): the RS/AR/RR procedure, failover, cancel, limits."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.controller.states import ReplicaState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster, quiet_config

# docs/architecture.md#reassignment-trace: RS, AR, RR, leader, ISR.
REASSIGNMENT_TRACE = [
    ((1, 2, 3), (), (), 1, {1, 2, 3}),  # initial state
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, {1, 2, 3}),  # step A2
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, {1, 2, 3, 4, 5, 6}),  # phase B
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 4, {1, 2, 3, 4, 5, 6}),  # step B3
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 4, {4, 5, 6}),  # step B4
    ((4, 5, 6), (), (), 4, {4, 5, 6}),  # step B6
]


def row(value: PartitionValue) -> tuple[object, ...]:
    moving = value.reassignment
    adding = moving.adding_replicas if moving else ()
    removing = moving.removing_replicas if moving else ()
    return (value.replicas, adding, removing, value.leader, set(value.isr))


def reassign(
    c: Cluster, replicas: Sequence[int] | None, topic: str = "t", partition: int = 0
) -> api.PartitionResult:
    reply = c.ok(
        api.AlterReassignments(
            reassignments=[
                api.ReassignmentTarget(
                    topic=topic,
                    partition=partition,
                    replicas=None if replicas is None else list(replicas),
                )
            ]
        )
    )
    [result] = reply.results
    return result  # type: ignore[no-any-return]


def seeded(**config: object) -> Cluster:
    c = Cluster(quiet_config(**config))  # type: ignore[arg-type]
    c.add_nodes(range(1, 7))
    c.create("t", assignment={0: [1, 2, 3]})
    return c


def test_seed_002_table_row_by_row() -> None:
    c = seeded()
    trace = [c.p("t")]
    assert reassign(c, [4, 5, 6]).error is ErrorCode.NONE
    trace += [v for v in c.partition_records() if v is not None]
    # Phase B: the leader reports that 4, 5 and 6 caught up; the same handler runs B3-B6.
    reply = c.alter_isr("t", 0, [1, 2, 3, 4, 5, 6])
    trace += [v for v in c.partition_records() if v is not None]
    assert [row(v) for v in trace] == REASSIGNMENT_TRACE
    # The leader that sent the ISR learns the outcome: it no longer leads.
    assert (reply.leader, reply.replicas, reply.isr) == (4, [4, 5, 6], [4, 5, 6])
    assert [v.reassignment.step if v.reassignment else None for v in trace] == [
        None, "A2", "A2", "B3", "B4", None,
    ]  # fmt: skip
    # Epochs: A1 bumps the leader epoch, B3 bumps it again; every record bumps the partition.
    assert [v.leader_epoch for v in trace] == [0, 1, 1, 2, 2, 2]
    assert [v.partition_epoch for v in trace] == [0, 1, 2, 3, 4, 5]
    assert trace[3].election == "reassigned"
    c.check()


def test_seed_002_with_followers_reporting_one_by_one() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.caught_up(4, "t")
    c.caught_up(5, "t")
    assert row(c.p("t")) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, {1, 2, 3, 4, 5})
    c.caught_up(6, "t")
    records = [row(v) for v in c.partition_records() if v is not None]
    assert records == REASSIGNMENT_TRACE[2:]
    assert c.shard.image.reassigning() == set()
    c.check()


def test_replica_states_along_the_way() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    value = c.p("t")
    live = c.shard.image.live_nodes()
    states = c.shard.replica_states
    assert [states.state("t", 0, n, value, live) for n in (4, 1)] == [
        ReplicaState.NEW,
        ReplicaState.ONLINE,
    ]
    c.alter_isr("t", 0, [1, 2, 3, 4, 5, 6])
    value = c.p("t")
    assert states.state("t", 0, 4, value, live) is ReplicaState.ONLINE
    assert states.state("t", 0, 1, value, live) is ReplicaState.NON_EXISTENT
    assert not states.has_explicit()


@pytest.mark.parametrize("step", ["A2", "B3", "B4"])
def test_reassignment_resumes_after_failover(step: str) -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.alter_isr("t", 0, [1, 2, 3, 4, 5, 6])
    # The controller dies right after the record of ``step`` was appended.
    cut = next(
        i
        for i, r in enumerate(c.log)
        if isinstance(r.value, PartitionValue)
        and r.value.reassignment is not None
        and r.value.reassignment.step == step
        and (step != "A2" or set(r.value.isr) == {1, 2, 3, 4, 5, 6})
    )
    c.log = c.log[: cut + 1]
    successor = c.failover()
    assert row(successor.p("t")) == REASSIGNMENT_TRACE[-1]
    assert successor.shard.image.reassigning() == set()
    successor.check()


def test_reassignment_resumes_after_failover_waiting_for_the_isr() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.caught_up(4, "t")
    successor = c.failover()
    assert row(successor.p("t")) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, {1, 2, 3, 4})
    successor.caught_up(5, "t")
    successor.caught_up(6, "t")
    assert row(successor.p("t")) == REASSIGNMENT_TRACE[-1]
    # Every record of the new controller carries its epoch.
    assert successor.p("t").controller_epoch == 1
    successor.check()


def test_leader_in_the_target_stays() -> None:
    c = seeded()
    reassign(c, [1, 4])
    c.caught_up(4, "t")
    value = c.p("t")
    assert (value.replicas, value.leader, value.isr, value.leader_epoch) == ((1, 4), 1, (1, 4), 1)
    steps = [v.reassignment.step if v and v.reassignment else None for v in c.partition_records()]
    assert steps == ["A2", "B4", None]  # no B3 record: nothing to elect


def test_reordering_replicas_completes_at_once() -> None:
    c = seeded()
    reassign(c, [3, 2, 1])
    value = c.p("t")
    assert (value.replicas, value.reassignment, value.leader) == ((3, 2, 1), None, 1)


def test_same_replicas_is_a_no_op() -> None:
    c = seeded()
    assert reassign(c, [1, 2, 3]).error is ErrorCode.NONE
    assert c.last.records == []


def test_cancel_reverts_to_the_original_replicas() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.caught_up(4, "t")
    assert reassign(c, None).error is ErrorCode.NONE
    value = c.p("t")
    assert row(value) == ((1, 2, 3), (), (), 1, {1, 2, 3})
    assert value.leader_epoch == 2  # A1, then the revert
    # Replicas 4-6 were deleted on the way out.
    assert c.shard.image.replicas_on(4) == set()
    assert reassign(c, None).error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    c.check()


def test_cancel_moves_leadership_back_to_the_original_replicas() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.caught_up(4, "t")
    c.ok(api.FenceNode(node_id=1))  # leadership goes to 4, first live ISR member of RS
    assert c.p("t").leader == 4
    reassign(c, None)
    value = c.p("t")
    assert (value.replicas, value.leader, value.isr) == ((1, 2, 3), 2, (2, 3))
    c.check()


def test_cancel_is_refused_when_no_original_replica_is_in_sync() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1]})
    reassign(c, [2, 3])
    c.caught_up(2, "t")
    c.ok(api.FenceNode(node_id=1))  # the data now lives on node 2 only
    assert (c.p("t").leader, c.p("t").isr) == (2, (2,))
    result = reassign(c, None)
    assert result.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "none of them is in the ISR [2]" in (result.message or "")
    assert c.last.records == []


def test_new_target_for_a_moving_partition() -> None:
    c = seeded()
    reassign(c, [4, 5, 6])
    c.caught_up(4, "t")
    reassign(c, [1, 5])
    value = c.p("t")
    assert row(value) == ((1, 5, 2, 3), (5,), (2, 3), 1, {1, 2, 3})
    assert value.reassignment is not None and value.reassignment.original_replicas == (1, 2, 3)
    c.caught_up(5, "t")
    assert row(c.p("t")) == ((1, 5), (), (), 1, {1, 5})
    # Asking for the original replicas is a cancel.
    reassign(c, [2, 3, 4])
    reassign(c, [1, 5])
    assert row(c.p("t")) == ((1, 5), (), (), 1, {1, 5})
    c.check()


def test_invalid_targets() -> None:
    c = seeded()
    for replicas, fragment in [([], "empty"), ([4, 4], "duplicate"), ([4, 9], "unknown nodes [9]")]:
        result = reassign(c, replicas)
        assert result.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert fragment in (result.message or "")
    assert reassign(c, [4], topic="x").error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(c, [4], partition=3).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.last.records == []


def test_results_are_per_partition() -> None:
    c = seeded()
    c.create("u", assignment={0: [1], 1: [2]})
    reply = c.ok(
        api.AlterReassignments(
            reassignments=[
                api.ReassignmentTarget(topic="u", partition=0, replicas=[3]),
                api.ReassignmentTarget(topic="u", partition=1, replicas=[9]),
                api.ReassignmentTarget(topic="u", partition=1, replicas=None),
            ]
        )
    )
    assert [r.error for r in reply.results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
    ]
    assert c.p("u", 0).reassignment is not None


def test_concurrent_moves_are_limited_and_the_rest_queued() -> None:
    c = Cluster(quiet_config(max_concurrent_reassignments=2))
    c.add_nodes(range(1, 5))
    c.create("t", assignment={p: [1] for p in range(4)})
    c.now += 10
    for p in range(4):
        reassign(c, [2], partition=p)
        c.now += 1
    steps = [c.p("t", p).reassignment.step for p in range(4)]  # type: ignore[union-attr]
    assert steps == ["A2", "A2", "QUEUED", "QUEUED"]
    # Queued: replicas untouched, epochs too; the target is persisted.
    queued = c.p("t", 2)
    assert (queued.replicas, queued.leader_epoch, queued.partition_epoch) == ((1,), 0, 0)
    assert queued.reassignment is not None and queued.reassignment.target_replicas == (2,)
    assert [v.partition for v in c.shard.image.reassignments()] == [0, 1, 2, 3]
    # One finishes: the oldest queued one starts in the same handler.
    c.caught_up(2, "t", 0)
    assert c.p("t", 0).reassignment is None
    assert c.p("t", 2).reassignment.step == "A2"  # type: ignore[union-attr]
    assert c.p("t", 3).reassignment.step == "QUEUED"  # type: ignore[union-attr]
    # Cancelling a queued one just drops it.
    reassign(c, None, partition=3)
    assert c.p("t", 3).reassignment is None and c.p("t", 3).replicas == (1,)
    c.check()


def test_queued_reassignments_start_after_failover() -> None:
    c = Cluster(quiet_config(max_concurrent_reassignments=1))
    c.add_nodes(range(1, 4))
    c.create("t", assignment={0: [1], 1: [1]})
    reassign(c, [2], partition=0)
    reassign(c, [3], partition=1)
    assert c.p("t", 1).reassignment.step == "QUEUED"  # type: ignore[union-attr]
    same = c.failover()
    assert same.p("t", 1).reassignment.step == "QUEUED"  # type: ignore[union-attr]
    # A controller with more slots starts the queued one on load.
    bigger = Cluster(quiet_config(max_concurrent_reassignments=5), log=list(c.log))
    assert bigger.p("t", 1).reassignment.step == "A2"  # type: ignore[union-attr]
    bigger.node_epochs = dict(c.node_epochs)
    bigger.caught_up(3, "t", 1)
    assert bigger.p("t", 1).replicas == (3,)
    bigger.check()


def test_reassignment_waits_for_a_live_target_leader() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1]})
    reassign(c, [2])
    c.caught_up(2, "t")
    assert row(c.p("t")) == ((2,), (), (), 2, {2})
