"""Goal-based rebalance execution as controller state: limits, failover, stop, errors."""

from __future__ import annotations

from collections import Counter

from kafkacoord.codecs.models import PartitionKey, RebalanceState, RebalanceValue
from kafkacoord.coordinator.controller.config import InternalTopicSpec
from kafkacoord.coordinator.controller.planner import plan_rebalance
from kafkacoord.coordinator.controller.rebalance_execution import nodes_of
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster, quiet_config

RACKS = {n: f"r{n % 3}" for n in range(1, 9)}


def scene(partitions: int = 30) -> Cluster:
    c = Cluster()
    for node in range(1, 7):
        c.register(node, rack=RACKS[node])
    assignment = {p: [1 + p % 6, 1 + (p + 1) % 6] for p in range(partitions)}
    c.create("orders", assignment=assignment)
    for node in (7, 8):  # two new, empty nodes
        c.register(node, rack=RACKS[node])
    return c


def plan(c: Cluster, remove: tuple[int, ...] = ()) -> api.StartRebalance:
    image = c.shard.image
    assignment = {(v.topic, v.partition): list(v.replicas) for v in image.iter_partitions()}
    racks = {n: v.rack for n, v in image.nodes.items() if not v.fenced}
    target = plan_rebalance(assignment, racks, remove)
    return api.StartRebalance(
        proposal_id="p1",
        goals=["rack", "replicas", "leaders"],
        remove_nodes=list(remove),
        moves=[
            api.RebalanceMoveBody(topic=t, partition=p, original_replicas=assignment[(t, p)],
                                  target_replicas=r)
            for (t, p), r in sorted(target.items()) if r != assignment[(t, p)]
        ],
        max_concurrent_moves_per_node=2,
        max_concurrent_moves=4,
        max_concurrent_leader_moves=3,
    )  # fmt: skip


def rebalance(c: Cluster) -> RebalanceValue:
    value = c.shard.image.rebalance
    assert value is not None
    return value


def assert_within_limits(c: Cluster, limits: api.StartRebalance) -> None:
    moving = 0
    per_node: Counter[int] = Counter()
    for v in c.shard.image.iter_partitions():
        r = v.reassignment
        if r is not None and set(r.original_replicas) != set(r.target_replicas):
            moving += 1
            per_node.update(set(r.original_replicas) ^ set(r.target_replicas))
    assert moving <= limits.max_concurrent_moves
    assert max(per_node.values(), default=0) <= limits.max_concurrent_moves_per_node, per_node


def catch_up_one(c: Cluster) -> bool:
    """One adding replica of one moving partition reports itself in sync."""
    for v in c.shard.image.iter_partitions():
        r = v.reassignment
        if r is not None and r.step != "QUEUED":
            lagging = [n for n in r.adding_replicas if n not in v.isr]
            if lagging:
                c.caught_up(lagging[0], v.topic, v.partition)
                return True
    return False


def test_a_rebalance_runs_within_its_limits_and_survives_a_controller_failover() -> None:
    c = scene()
    body = plan(c)
    assert len(body.moves) >= 8
    started = c.ok(body)
    assert (started.proposal_id, started.state) == ("p1", "RUNNING")
    assert_within_limits(c, body)
    steps = 0
    while rebalance(c).state is RebalanceState.RUNNING and steps < 500:
        assert catch_up_one(c) or c.tick(1_000) is not None
        assert_within_limits(c, body)
        steps += 1
        if steps == 12:  # halfway: a new controller resumes from the log alone
            c = c.failover()
            assert_within_limits(c, body)
            assert rebalance(c).state is RebalanceState.RUNNING
    assert rebalance(c).state is RebalanceState.COMPLETED, rebalance(c)
    for move in body.moves:
        v = c.p(move.topic, move.partition)
        assert list(v.replicas) == move.target_replicas
        assert v.reassignment is None
    counts = Counter(n for v in c.shard.image.iter_partitions() for n in v.replicas)
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert set(counts) == set(range(1, 9))  # the new nodes filled up
    c.check()


def test_a_second_rebalance_is_refused_naming_the_running_one() -> None:
    c = scene()
    c.ok(plan(c))
    again = plan(c).model_copy(update={"proposal_id": "p2", "moves": []})
    message = c.fails(again, ErrorCode.REASSIGNMENT_IN_PROGRESS)
    assert "p1" in message and "rebalance stop" in message


def test_a_stale_plan_is_refused_and_writes_nothing() -> None:
    c = scene()
    body = plan(c)
    first = body.moves[0]
    c.ok(api.AlterReassignments(reassignments=[api.ReassignmentTarget(
        topic=first.topic, partition=first.partition, replicas=[7, 8])]))  # fmt: skip
    message = c.fails(body, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert "plan again" in message and f"{first.topic}-{first.partition}" in message
    assert c.shard.image.rebalance is None


def test_stop_starts_nothing_more_and_lets_moves_in_flight_finish() -> None:
    c = scene()
    body = plan(c)
    c.ok(body)
    in_flight = {(v.topic, v.partition) for v in c.shard.image.iter_partitions()
                 if v.reassignment is not None}  # fmt: skip
    assert in_flight
    stopped = c.ok(api.StopRebalance())
    assert stopped.state == "STOPPING"
    while catch_up_one(c):
        pass
    assert rebalance(c).state is RebalanceState.STOPPED
    moved = {(m.topic, m.partition) for m in body.moves
             if list(c.p(m.topic, m.partition).replicas) == m.target_replicas}  # fmt: skip
    data_moves = {(m.topic, m.partition) for m in body.moves
                  if set(m.original_replicas) != set(m.target_replicas)}  # fmt: skip
    assert moved & data_moves == in_flight & data_moves  # only what was moving finished
    c.fails(api.StopRebalance(), ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    # Stopped is finished: a new plan may run.
    assert c.ok(plan(c).model_copy(update={"proposal_id": "p3"})).state == "RUNNING"


def test_an_order_only_move_is_one_record_and_moves_the_leader() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.alter_isr("t", 0, [1, 2])
    body = api.StartRebalance(proposal_id="lead", moves=[api.RebalanceMoveBody(
        topic="t", partition=0, original_replicas=[1, 2], target_replicas=[2, 1])])  # fmt: skip
    assert c.ok(body).state == "RUNNING"
    partition_records = [r for r in c.last.records if isinstance(r.key, PartitionKey)]
    assert len(partition_records) == 1
    assert (c.p("t").replicas, c.p("t").leader) == ((2, 1), 2)
    assert rebalance(c).state is RebalanceState.COMPLETED


def test_a_partition_changed_by_something_else_is_left_alone() -> None:
    c = scene(6)
    body = plan(c)
    c.ok(body)
    pending = [m for m in body.moves if c.p(m.topic, m.partition).reassignment is None
               and list(c.p(m.topic, m.partition).replicas) == m.original_replicas]  # fmt: skip
    if pending:  # an operator moves one by hand meanwhile
        m = pending[0]
        c.ok(api.AlterReassignments(reassignments=[api.ReassignmentTarget(
            topic=m.topic, partition=m.partition, replicas=[3, 4])]))  # fmt: skip
    for _ in range(200):
        if rebalance(c).state is not RebalanceState.RUNNING:
            break
        if not catch_up_one(c):
            c.tick(1_000)
    assert rebalance(c).state is RebalanceState.COMPLETED
    if pending:
        assert "left alone" in rebalance(c).message


def test_unknown_nodes_and_duplicates_are_refused() -> None:
    c = scene(2)
    bad = api.StartRebalance(proposal_id="x", moves=[api.RebalanceMoveBody(
        topic="orders", partition=0, original_replicas=list(c.p("orders").replicas),
        target_replicas=[1, 99])])  # fmt: skip
    assert "99" in c.fails(bad, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    dup = bad.model_copy(update={"moves": [bad.moves[0].model_copy(
        update={"target_replicas": [1, 2]})] * 2})  # fmt: skip
    c.fails(dup, ErrorCode.INVALID_REQUEST)
    missing = bad.model_copy(update={"moves": [bad.moves[0].model_copy(
        update={"topic": "nope", "target_replicas": [1, 2]})]})  # fmt: skip
    c.fails(missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_nodes_of_a_move_are_those_that_gain_or_lose_a_replica() -> None:
    from kafkacoord.codecs.models import RebalanceMove

    assert nodes_of(RebalanceMove("t", 0, (1, 2, 3), (3, 4, 1))) == {2, 4}


def test_a_move_the_controller_refuses_is_dropped_and_the_rest_completes() -> None:
    shards = InternalTopicSpec("shards", partitions=1, replication_factor=1)
    c = Cluster(quiet_config(internal_topics=(shards,)))
    c.register(1, roles=["coordinator"])
    c.register(2)
    c.create("t", assignment={0: [2]})
    assert c.p("shards").replicas == (1,)
    # Node 2 may not host the internal topic: that move is refused when it would start.
    body = api.StartRebalance(proposal_id="p", moves=[
        api.RebalanceMoveBody(topic="shards", partition=0, original_replicas=[1],
                              target_replicas=[2]),
        api.RebalanceMoveBody(topic="t", partition=0, original_replicas=[2], target_replicas=[1]),
    ])  # fmt: skip
    c.ok(body)
    while rebalance(c).state is RebalanceState.RUNNING and catch_up_one(c):
        pass
    done = rebalance(c)
    assert done.state is RebalanceState.COMPLETED
    assert [m.topic for m in done.moves] == ["t"]
    assert "shards-0" in done.message and "role" in done.message
    assert c.p("t").replicas == (1,) and c.p("shards").replicas == (1,)
