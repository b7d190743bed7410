"""ControllerShard as a Shard: activation, dispatch, fencing of stale controllers, failover."""

from __future__ import annotations

import gc

import pytest

from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    DecisionKey,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionValue,
)
from kafkacoord.coordinator.controller.config import ControllerConfig, InternalTopicSpec
from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.protocol import Empty, ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef, Shard

from .support import START_MS, Cluster, replayed


def request(body: object, api_name: str | None = None) -> Request:
    name = api_name or type(body).__name__
    return Request(RequestRef("c", 1), name, body)  # type: ignore[arg-type]


def test_it_is_a_shard() -> None:
    shard: Shard = ControllerShard(ControllerConfig(), 1, "x")
    assert shard.next_deadline_ms() is None


def test_activation_writes_the_next_epoch_before_any_decision() -> None:
    c = Cluster()
    assert c.last.records[0].key == ControllerKey()
    assert c.last.records[0].value == ControllerValue(0, 1000, "controller-1000", START_MS)
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.now += 5
    successor = c.failover()
    first = successor.last.records[0]
    assert first.value == ControllerValue(1, 1001, "controller-1001", START_MS + 5)
    assert successor.shard.epoch == 1 == successor.shard.image.controller_epoch
    successor.ok(api.FenceNode(node_id=1))
    assert all(
        r.value.controller_epoch == 1  # type: ignore[union-attr]
        for r in successor.last.records
    )
    assert successor.failover().shard.epoch == 2


def test_failover_gives_every_unfenced_node_a_fresh_session() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.register(3, heartbeat=False)
    c.now += 8000
    successor = c.failover()
    timeout = c.config.node_session_timeout_ms
    assert successor.shard.timers.deadline(("session", 1)) == c.now + timeout
    assert ("session", 3) not in successor.shard.timers
    successor.tick(timeout - 1)
    assert successor.last.records == []
    successor.tick(1)
    assert {r.key for r in successor.last.records} >= {NodeKey(1), NodeKey(2)}


def test_requests_before_activation_or_after_unloading() -> None:
    shard = ControllerShard(ControllerConfig(), 1, "x")
    [reply] = shard.handle(request(api.FenceNode(node_id=1)), 0).replies
    assert reply.error is ErrorCode.NOT_CONTROLLER and "not loaded" in (reply.message or "")
    assert not shard.fire_timers(0)
    shard.on_loaded(0)
    assert shard.active
    assert shard.on_unloaded() == []
    assert not shard.active and shard.next_deadline_ms() is None
    [reply] = shard.handle(request(api.FenceNode(node_id=1)), 0).replies
    assert reply.error is ErrorCode.NOT_CONTROLLER


def test_a_superseded_controller_stops_deciding() -> None:
    c = Cluster()
    c.add_nodes([1])
    c.shard.replay(c.log[0].__class__(ControllerKey(), ControllerValue(7, 5, "other", 0)))
    assert not c.shard.active
    reply = c.call(api.FenceNode(node_id=1))
    assert reply.error is ErrorCode.NOT_CONTROLLER and "epoch 7" in (reply.message or "")
    assert c.last.records == []
    assert not c.shard.fire_timers(c.now + 10**9)


def test_unknown_api_and_wrong_body() -> None:
    c = Cluster()
    [reply] = c.shard.handle(request(Empty(), "Nope"), 0).replies
    assert reply.error is ErrorCode.INVALID_REQUEST
    [reply] = c.shard.handle(request(Empty(), "FenceNode"), 0).replies
    assert reply.error is ErrorCode.INVALID_REQUEST and "FenceNode body" in (reply.message or "")


def test_a_handler_bug_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster()
    c.add_nodes([1])

    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(c.shard.partitions, "on_node_fenced", broken)
    reply = c.call(api.FenceNode(node_id=1))
    assert reply.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert c.last.records == []


def test_gc_is_paused_only_while_a_handler_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster()
    seen: list[bool] = []
    original = c.shard.nodes.register

    def spy(*args: object) -> object:
        seen.append(gc.isenabled())
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(c.shard, "_handlers", {**c.shard._handlers, "RegisterNode": spy})
    assert gc.isenabled()
    c.register(1, heartbeat=False)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        c.register(2, heartbeat=False)
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_zombie_controllers_late_writes_are_ignored_on_replay() -> None:
    old = Cluster()
    old.add_nodes([1, 2, 3])
    old.create("t", assignment={0: [1, 2, 3]})
    new = old.failover()
    new.ok(api.FenceNode(node_id=3))
    # The old controller, unaware, keeps deciding and its writes land after the new epoch.
    old.ok(api.FenceNode(node_id=1))
    zombie = old.last.records
    assert zombie and all(r.value.controller_epoch == 0 for r in zombie)  # type: ignore[union-attr]
    for record in zombie:
        new.shard.replay(record)
        new.log.append(record)
    assert new.p("t").leader == 1 and not new.shard.image.node(1).fenced  # type: ignore[union-attr]
    assert replayed(new.log).snapshot() == new.shard.image.snapshot()
    new.check()


def test_a_new_controller_finishes_a_partly_written_fencing() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 1, 3]})
    c.ok(api.FenceNode(node_id=1))
    # Only the node record made it to the log, with the decision record before it.
    node_record = next(r for r in c.last.records if isinstance(r.key, NodeKey))
    cut = c.log.index(node_record)
    assert isinstance(c.log[cut - 1].key, DecisionKey)
    c.log = c.log[: cut + 1]
    successor = c.failover()
    assert successor.p("t", 0).leader == 2
    assert successor.p("t", 1).isr == (2, 3)
    successor.check()


def test_a_new_controller_elects_leaderless_partitions_it_can() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.caught_up(2, "t", caught_up=False)
    c.ok(api.FenceNode(node_id=1))
    assert c.p("t").leader == -1
    # Unclean election is switched on in the configuration of the next controller.
    config = ControllerConfig(
        auto_leader_rebalance_enable=False, unclean_leader_election_enable=True
    )
    successor = Cluster(config, log=list(c.log))
    value = successor.p("t")
    assert (value.leader, value.election) == (2, "unclean")


def test_loading_reproduces_the_live_state() -> None:
    config = ControllerConfig(
        auto_leader_rebalance_enable=False,
        internal_topics=(InternalTopicSpec("__kc_offsets", 3, 2),),
        max_concurrent_reassignments=1,
    )
    c = Cluster(config)
    c.add_nodes([1, 2, 3])
    c.register(4, roles=["coordinator"])
    c.register(5, roles=["coordinator"])
    c.create("t", 4, 2)
    c.ok(
        api.AlterReassignments(
            reassignments=[
                api.ReassignmentTarget(topic="t", partition=0, replicas=[3, 1]),
                api.ReassignmentTarget(topic="t", partition=1, replicas=[2, 1]),
            ]
        )
    )
    c.ok(api.FenceNode(node_id=2))
    c.ok(api.DeleteTopic(name="t"))
    assert replayed(c.log).snapshot() == c.shard.image.snapshot()
    successor = c.failover()
    successor.check()


def test_stale_records_are_not_replica_state_changes() -> None:
    c = Cluster()
    c.add_nodes([1])
    c.create("t", assignment={0: [1]})
    value = c.p("t")
    stale = PartitionValue(
        "t", 0, value.state, value.replicas, value.isr, value.leader, 9, 9, 0, -5
    )
    c.shard.replay(c.log[0].__class__(PartitionKey("t", 0), stale))
    assert c.p("t") == value
    assert isinstance(c.shard.image.node(1), NodeValue)
