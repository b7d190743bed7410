"""Every controller decision carries its cause (docs/architecture.md#causes): a decision
record with what triggered it, written once, and per partition the decision's id and the
election rule; what the partition was before is the record before it. One case per
trigger, through the controller shard; and no path is left without one."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from pathlib import Path

import kafkacoord
from kafkacoord.codecs import decode_record, encode_record
from kafkacoord.codecs.models import (
    DecisionKey,
    NodeValue,
    PartitionKey,
    PartitionValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.coordinator.controller.leadership import REBALANCE_TIMER
from kafkacoord.coordinator.controller.nodes import isr_shrink_timer, session_timer
from kafkacoord.coordinator.controller.partition_change import NO_CANDIDATE
from kafkacoord.coordinator.controller.rebalance_execution import EXECUTE_TIMER
from kafkacoord.coordinator.controller.topic_deletion import delete_topic_timer
from kafkacoord.coordinator.protocol import CONTROLLER_APIS
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Record

from .support import Cluster, quiet_config, trigger_of

K = TriggerKind


def three(**config: object) -> Cluster:
    """Nodes 1, 2, 3; t-0 led by 1, t-1 led by 2 with 1 following."""
    c = Cluster(quiet_config(**config))
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 1, 3]})
    return c


def written(records: list[Record], topic: str, partition: int) -> list[PartitionValue]:
    return [
        r.value
        for r in records
        if r.key == PartitionKey(topic, partition) and isinstance(r.value, PartitionValue)
    ]


def why(log: Iterable[Record], value: PartitionValue) -> tuple[Trigger, str]:
    """What the log says caused ``value``: its decision's trigger, and its rule."""
    assert value.cause is not None
    return trigger_of(log, value.cause.decision), value.cause.rule


def before(log: list[Record], value: PartitionValue) -> tuple[int, tuple[int, ...]]:
    """The leader and ISR of the partition's record before ``value`` in ``log``."""
    values = written(log, value.topic, value.partition)
    previous = values[values.index(value) - 1]
    return previous.leader, previous.isr


def last_node(c: Cluster, node: int) -> NodeValue:
    value = c.shard.image.nodes[node]
    return value


def request_id(c: Cluster) -> str:
    return f"test:{c._correlation}"


def test_a_session_expiry_names_the_node_and_its_last_heartbeat() -> None:
    c = three()
    c.heartbeat_all([1, 2, 3])
    last = c.now
    c.run_for(2 * c.config.node_session_timeout_ms, alive=[2, 3])
    expired = Trigger(K.SESSION_EXPIRED, node_id=1, heartbeat_ms=last)
    assert last_node(c, 1).fenced and trigger_of(c.log, last_node(c, 1).decision) == expired
    [led] = written(c.log, "t", 0)[-1:]
    assert (led.leader, led.leader_epoch) == (2, 1)
    assert why(c.log, led) == (expired, "offline")
    assert before(c.log, led) == (1, (1, 2, 3))
    # The ISR it only followed shrinks in a later batch, for the same decision.
    [followed] = written(c.log, "t", 1)[-1:]
    assert followed.isr == (2, 3)
    assert followed.cause is not None and led.cause is not None
    assert followed.cause.decision == led.cause.decision
    assert why(c.log, followed) == (expired, "")
    # One decision record for the whole fencing.
    assert [r.key for r in c.log].count(led.cause.decision) == 1
    # What the log holds reads back with its cause.
    assert decode_record(*encode_record(PartitionKey("t", 0), led)) == (PartitionKey("t", 0), led)
    c.check()


def test_a_controlled_shutdown_moves_leadership_for_its_node() -> None:
    c = three()
    c.ok(api.ControlledShutdown(node_id=1, node_epoch=c.node_epochs[1]))
    shutdown = Trigger(K.CONTROLLED_SHUTDOWN, node_id=1, request_id=request_id(c))
    [led] = written(c.last.records, "t", 0)
    assert led.leader == 2
    assert why(c.log, led) == (shutdown, "controlled_shutdown")
    [followed] = written(c.last.records, "t", 1)
    assert why(c.log, followed) == (shutdown, "")
    assert last_node(c, 1).fenced and trigger_of(c.log, last_node(c, 1).decision) == shutdown
    c.check()


def test_an_isr_change_names_the_node_that_reported_it() -> None:
    c = three()
    c.alter_isr("t", 0, [1, 2])
    [shrunk] = written(c.last.records, "t", 0)
    assert why(c.log, shrunk) == (Trigger(K.ISR_CHANGE, node_id=1, api="AlterPartition"), "")
    assert before(c.log, shrunk) == (1, (1, 2, 3))
    c.caught_up(3, "t")
    [grown] = written(c.last.records, "t", 0)
    assert grown.isr == (1, 2, 3)
    assert why(c.log, grown) == (Trigger(K.ISR_CHANGE, node_id=3, api="ReplicaStatus"), "")


def test_an_admin_request_names_its_principal_and_request_id() -> None:
    c = three()
    c.principal = "CN=alice"
    c.ok(api.FenceNode(node_id=1))
    fenced = Trigger(K.ADMIN_REQUEST, node_id=1, principal="CN=alice",
                     request_id=request_id(c), api="FenceNode")  # fmt: skip
    [led] = written(c.last.records, "t", 0)
    assert why(c.log, led) == (fenced, "offline")
    c.heartbeat(1)
    c.caught_up(1, "t")
    c.ok(api.ElectLeaders(election_type="preferred"))
    [elected] = written(c.last.records, "t", 0)
    assert elected.leader == 1
    assert why(c.log, elected) == (
        Trigger(K.ADMIN_REQUEST, principal="CN=alice", request_id=request_id(c),
                api="ElectLeaders"), "preferred")  # fmt: skip
    assert before(c.log, elected) == (2, (2, 3, 1))


def test_a_rebalance_plan_step_names_the_plan_and_the_move() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2], 1: [1, 2]})
    moves = [
        api.RebalanceMoveBody(topic="t", partition=0, original_replicas=[1, 2],
                              target_replicas=[2, 1]),
        api.RebalanceMoveBody(topic="t", partition=1, original_replicas=[1, 2],
                              target_replicas=[1, 3]),
    ]  # fmt: skip
    c.ok(api.StartRebalance(proposal_id="plan-7", moves=moves))
    [order_only] = written(c.last.records, "t", 0)
    assert (order_only.replicas, order_only.leader) == ((2, 1), 2)
    step = Trigger(K.REBALANCE_PLAN, plan_id="plan-7", plan_step=1)
    assert why(c.log, order_only) == (step, "preferred")
    [started] = written(c.last.records, "t", 1)[:1]
    assert started.reassignment is not None
    assert why(c.log, started) == (Trigger(K.REBALANCE_PLAN, plan_id="plan-7", plan_step=2), "")


def test_an_auto_leader_rebalance_names_the_imbalance() -> None:
    c = three(auto_leader_rebalance_enable=True, leader_imbalance_check_interval_ms=1000)
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    c.caught_up(1, "t")
    assert c.p("t").leader == 2  # node 1 prefers one partition and leads none of it
    c.tick(1000)
    [elected] = written(c.last.records, "t", 0)
    assert elected.leader == 1
    assert why(c.log, elected) == (
        Trigger(K.LEADER_REBALANCE, node_id=1, imbalance=1.0), "preferred")  # fmt: skip


def test_elr_and_unclean_elections_name_their_rule() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    for node in (3, 2, 1):
        c.ok(api.FenceNode(node_id=node))
    [offline] = written(c.last.records, "t", 0)
    assert offline.leader == -1 and why(c.log, offline)[1] == NO_CANDIDATE
    assert before(c.log, offline) == (1, (1,))
    c.heartbeat(2)
    [elected] = written(c.last.records, "t", 0)
    assert why(c.log, elected) == (Trigger(K.NODE_UNFENCED, node_id=2), "elr")

    u = Cluster()
    u.add_nodes([1, 2])
    configs = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    u.create("t", assignment={0: [1, 2]}, configs=configs)
    u.caught_up(2, "t", caught_up=False)
    u.register(2, incarnation="inc-2-after-crash")  # out of the ELR: its log may be short
    u.heartbeat(2)
    u.ok(api.FenceNode(node_id=1))
    [unclean] = written(u.last.records, "t", 0)
    assert unclean.leader == 2
    assert why(u.log, unclean)[1] == "unclean"
    assert before(u.log, unclean) == (1, (1,))


def test_topics_created_and_deleted_name_their_request() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.principal = "CN=ops"
    c.create("t", assignment={0: [1, 2]})
    created = Trigger(K.TOPIC_CREATED, principal="CN=ops", request_id=request_id(c))
    assert why(c.log, c.p("t")) == (created, "initial")
    c.ok(api.CreatePartitions(topic="t", count=2, assignment=[[2, 1]]))
    grown = Trigger(K.PARTITIONS_CREATED, principal="CN=ops", request_id=request_id(c))
    assert why(c.log, c.p("t", 1)) == (grown, "initial")
    c.ok(api.DeleteTopic(name="t"))
    deleted = Trigger(K.TOPIC_DELETED, principal="CN=ops", request_id=request_id(c))
    [offline] = written(c.last.records, "t", 0)
    assert offline.leader == -1 and why(c.log, offline) == (deleted, NO_CANDIDATE)


def test_a_new_controller_finishes_a_fencing_for_the_fencing_s_decision() -> None:
    c = three()
    c.heartbeat_all([1, 2, 3])
    last = c.now
    c.now += c.config.node_session_timeout_ms
    c.heartbeat_all([2, 3])
    fencing = c._apply(c.shard.fire_timers(c.now))  # fenced, new leaders written ...
    assert written(fencing.records, "t", 0) and not written(fencing.records, "t", 1)
    decision = fencing.records[0].key
    assert isinstance(decision, DecisionKey)
    # ... but the ISR shrink that follows never ran: a new controller finishes it, for the
    # original decision (written by the old controller's epoch, not again).
    successor = c.failover()
    expired = Trigger(K.SESSION_EXPIRED, node_id=1, heartbeat_ms=last)
    [followed] = written(successor.last.records, "t", 1)
    assert followed.isr == (2, 3) and followed.cause is not None
    assert followed.cause.decision == decision and followed.controller_epoch == 1
    assert why(successor.log + successor.last.records, followed) == (expired, "")
    assert not any(isinstance(r.key, DecisionKey) and r.key == decision
                   for r in successor.last.records)  # fmt: skip


# -- no path without a cause ------------------------------------------------------------------

# Every controller API and the kind of trigger its decisions carry: a new API fails here
# until it is given one (causes.request_trigger); every other is an admin request.
KIND_OF_API = {
    "RegisterNode": K.NODE_REGISTERED,
    "NodeHeartbeat": K.NODE_UNFENCED,
    "ControlledShutdown": K.CONTROLLED_SHUTDOWN,
    "FenceNode": K.ADMIN_REQUEST,
    "AlterPartition": K.ISR_CHANGE,
    "ReplicaStatus": K.ISR_CHANGE,
    "CreateTopic": K.TOPIC_CREATED,
    "DeleteTopic": K.TOPIC_DELETED,
    "CreatePartitions": K.PARTITIONS_CREATED,
    "AlterTopicConfigs": K.ADMIN_REQUEST,
    "DescribeTopicConfigs": K.ADMIN_REQUEST,  # a read: writes nothing
    "AlterReassignments": K.ADMIN_REQUEST,
    "ElectLeaders": K.ADMIN_REQUEST,
    "StartRebalance": K.ADMIN_REQUEST,
    "StopRebalance": K.ADMIN_REQUEST,
}


def test_every_handler_and_timer_has_a_trigger() -> None:
    from kafkacoord.coordinator.controller.causes import request_trigger
    from kafkacoord.coordinator.runtime.shard import Request, RequestRef

    c = three()
    assert set(c.shard._handlers) == set(KIND_OF_API) == set(CONTROLLER_APIS)
    for name, kind in KIND_OF_API.items():
        body = CONTROLLER_APIS[name].request.model_construct()
        trigger = request_trigger(Request(RequestRef("cli", 4, principal="CN=a"), name, body))
        named = kind in (K.ADMIN_REQUEST, K.ISR_CHANGE)  # others' kinds say their API
        assert (trigger.kind, trigger.api) == (kind, name if named else None)
        admin = CONTROLLER_APIS[name].admin
        assert (trigger.principal, trigger.request_id) == (
            ("CN=a", "cli:4") if admin else (None, None))  # fmt: skip
    timers: dict[Hashable, str] = {
        session_timer(1): K.SESSION_EXPIRED,
        isr_shrink_timer(1): K.NODE_FENCED,  # no fencing recorded for node 1: the bare fact
        delete_topic_timer("t"): K.TOPIC_DELETED,
        REBALANCE_TIMER: K.LEADER_REBALANCE,
        EXECUTE_TIMER: K.REBALANCE_PLAN,
    }
    batch = c.shard._batch(c.now)
    for key, kind in timers.items():
        trigger = c.shard._timer_trigger(batch, key)
        assert isinstance(trigger, Trigger) and trigger.kind == kind


def test_partition_values_are_built_in_one_module() -> None:
    # The builder attaches the cause; a value built elsewhere would have to make its own.
    root = Path(kafkacoord.__file__).parent
    builders = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if re.search(r"\bPartitionValue\(", path.read_text("utf-8"))
    )
    assert builders == [
        "codecs/models/metadata.py",
        "coordinator/controller/partition_change.py",
    ]
