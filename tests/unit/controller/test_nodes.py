"""Node lifecycle: registration, heartbeats, session expiry, fencing, controlled shutdown."""

from __future__ import annotations

import logging

import pytest

from kafkacoord.codecs.models import NodeKey, NodeValue, PartitionState, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef, replay_result

from .support import START_MS, Cluster, quiet_config, trigger_of


def node_records(cluster: Cluster) -> list[NodeValue]:
    return [r.value for r in cluster.last.records if isinstance(r.key, NodeKey)]  # type: ignore[misc]


# -- registration -------------------------------------------------------------------------------


def test_register_new_node_starts_fenced_until_its_first_heartbeat() -> None:
    c = Cluster()
    epoch = c.register(1, rack="r1", roles=["coordinator", "coordinator"], heartbeat=False)
    assert epoch == 1
    [value] = node_records(c)
    assert value == NodeValue(
        node_id=1, incarnation="inc-1", node_epoch=1, fenced=True, registered_ms=START_MS,
        controller_epoch=c.shard.epoch, rack="r1", endpoints={"app": "host1:9000"},
        shutting_down=False, roles=("coordinator",), decision=value.decision,
    )  # fmt: skip
    assert trigger_of(c.log, value.decision) == Trigger(TriggerKind.NODE_REGISTERED, node_id=1)
    assert c.shard.image.live_nodes() == set()
    reply = c.heartbeat(1)
    # The session it keeps for the node comes back: the node's lease runs that long.
    assert reply == api.NodeHeartbeatResponse(
        fenced=False, shutting_down=False, controller_epoch=0, session_timeout_ms=9000
    )
    assert [v.fenced for v in node_records(c)] == [False]
    assert c.shard.image.live_nodes() == {1}
    c.heartbeat(1)
    assert c.last.records == []  # a plain heartbeat writes nothing


def test_register_again_with_the_same_incarnation_is_a_retry() -> None:
    c = Cluster()
    c.register(1)
    assert c.register(1, heartbeat=False) == 1
    assert c.last.records == []
    assert c.shard.image.is_live(1)  # still unfenced
    c.ok(api.RegisterNode(node_id=1, incarnation="inc-1", rack="r9"))
    [value] = node_records(c)
    assert value.rack == "r9" and value.node_epoch == 1 and not value.fenced


def test_new_incarnation_bumps_the_epoch_and_replaces_the_old_process() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3]})
    epoch = c.register(1, incarnation="restarted", heartbeat=False)
    assert epoch == 2
    [value] = node_records(c)
    assert value.fenced and value.incarnation == "restarted"
    # The old process's leadership and ISR membership are gone with it.
    p = c.p("t")
    assert (p.leader, p.isr, p.leader_epoch, p.election) == (2, (2, 3), 1, "offline")
    # The old incarnation's epoch is stale now.
    c.fails(api.NodeHeartbeat(node_id=1, node_epoch=1), ErrorCode.STALE_BROKER_EPOCH)
    c.heartbeat(1)
    assert c.shard.image.is_live(1)
    c.check()


# -- heartbeats and sessions ------------------------------------------------------------------


def test_heartbeat_errors() -> None:
    c = Cluster()
    message = c.fails(api.NodeHeartbeat(node_id=4, node_epoch=1), ErrorCode.STALE_BROKER_EPOCH)
    assert "not registered" in message
    c.register(4)
    message = c.fails(api.NodeHeartbeat(node_id=4, node_epoch=7), ErrorCode.STALE_BROKER_EPOCH)
    assert "current epoch is 1" in message


def test_session_expiry_fences_and_moves_leadership_to_isr_members() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    timeout = c.config.node_session_timeout_ms
    assert c.shard.next_deadline_ms() == START_MS + timeout
    c.now += timeout - 1
    c.heartbeat_all([2, 3])
    assert c.tick().records == []
    c.tick(1)  # node 1's session runs out
    assert [v.fenced for v in node_records(c)] == [True]
    p0, p1 = c.p("t", 0), c.p("t", 1)
    assert (p0.leader, p0.isr, p0.leader_epoch, p0.partition_epoch) == (2, (2, 3), 1, 1)
    assert p0.election == "offline" and p0.state is PartitionState.ONLINE
    # Node 1 only followed t-1: the ISR shrinks, the leader and its epoch stay.
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.partition_epoch) == (2, (2, 3), 0, 1)
    c.check()


def test_heartbeats_keep_a_node_alive() -> None:
    c = Cluster()
    c.add_nodes([1])
    timeout = c.config.node_session_timeout_ms
    for _ in range(5):
        c.now += timeout // 2
        c.heartbeat(1)
        assert c.tick().records == []
    assert c.shard.image.is_live(1)
    assert c.shard.next_deadline_ms() == c.now + timeout


def test_last_isr_member_stays_in_the_isr_and_leads_again_when_back() -> None:
    # Kafka before KIP-966 (eligible leader replicas off); tests/unit/controller/test_elr.py
    # has the same story with ELR.
    c = Cluster(quiet_config(eligible_leader_replicas_enable=False))
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.caught_up(2, "t", caught_up=False)
    assert c.p("t").isr == (1,)
    c.ok(api.FenceNode(node_id=1))
    p = c.p("t")
    assert (p.leader, p.isr, p.state) == (-1, (1,), PartitionState.OFFLINE)
    assert c.shard.image.unavailable() == [p]
    # Node 2 is live but was out of the ISR: no clean election without unclean enabled.
    c.heartbeat(2)
    assert c.p("t").leader == -1
    c.heartbeat(1)  # unfences node 1: it is the clean leader
    p = c.p("t")
    assert (p.leader, p.isr, p.state, p.leader_epoch) == (1, (1,), PartitionState.ONLINE, 2)
    c.check()


def test_unclean_topic_elects_a_live_out_of_sync_replica() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]}, configs={"unclean.leader.election.enable": "true"})
    c.caught_up(2, "t", caught_up=False)
    c.ok(api.FenceNode(node_id=1))
    p = c.p("t")
    assert (p.leader, p.isr, p.election) == (2, (2,), "unclean")


def test_default_unclean_setting_applies_to_topics_without_one() -> None:
    c = Cluster(quiet_config(unclean_leader_election_enable=True))
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.caught_up(2, "t", caught_up=False)
    c.ok(api.FenceNode(node_id=1))
    assert c.p("t").leader == 2


def test_unfencing_elects_new_partitions_that_had_no_live_replica() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.register(3, heartbeat=False)
    c.create("t", assignment={0: [3]})
    p = c.p("t")
    assert (p.state, p.leader, p.isr) == (PartitionState.NEW, -1, ())
    c.heartbeat(3)
    p = c.p("t")
    assert (p.state, p.leader, p.isr, p.election) == (PartitionState.ONLINE, 3, (3,), "initial")


def test_two_sessions_expiring_in_one_run_chain_their_elections() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3]})
    c.now += c.config.node_session_timeout_ms
    c.heartbeat(3)
    c.tick()
    p = c.p("t")
    assert (p.leader, p.isr) == (3, (3,))
    # Node 1 then node 2: two records for the same partition, each from the previous.
    leaders = [v.leader for v in c.partition_records() if v is not None]
    assert leaders == [2, 3]
    c.check()


# -- FenceNode -----------------------------------------------------------------------------------


def test_fence_node_admin() -> None:
    c = Cluster()
    c.fails(api.FenceNode(node_id=9), ErrorCode.BROKER_NOT_AVAILABLE)
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.ok(api.FenceNode(node_id=1))
    assert c.shard.image.node(1).fenced  # type: ignore[union-attr]
    assert c.p("t").leader == 2
    c.ok(api.FenceNode(node_id=1))
    assert c.last.records == []
    # The heartbeat of a fenced node unfences it.
    reply = c.heartbeat(1)
    assert not reply.fenced


# -- controlled shutdown -----------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_and_fences_the_node() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2, 1]})
    reply = c.ok(api.ControlledShutdown(node_id=1, node_epoch=1))
    assert reply.remaining == []
    assert c.shard.image.led_by(1) == set()
    assert c.shard.image.in_isr_of(1) == set()
    p0 = c.p("t", 0)
    assert (p0.leader, p0.isr, p0.election) == (2, (2, 3), "controlled_shutdown")
    assert c.p("t", 1).isr == (2, 3)
    node = c.shard.image.node(1)
    assert node is not None and node.shutting_down and node.fenced
    # A shutting-down node's heartbeat does not unfence it.
    reply = c.heartbeat(1)
    assert reply.fenced and reply.shutting_down
    assert c.last.records == []
    c.check()


def test_controlled_shutdown_reports_what_nobody_else_can_lead() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("solo", assignment={0: [1]})
    c.create("pair", assignment={0: [1, 2], 1: [1, 2]})
    c.caught_up(2, "pair", 1, caught_up=False)
    reply = c.ok(api.ControlledShutdown(node_id=1, node_epoch=1))
    assert reply.remaining == [
        api.TopicPartitionRef(topic="pair", partition=1),
        api.TopicPartitionRef(topic="solo", partition=0),
    ]
    node = c.shard.image.node(1)
    assert node is not None and node.shutting_down and not node.fenced
    assert c.p("pair", 0).leader == 2
    # Shutting down, node 1 cannot lead anything new.
    c.ok(api.FenceNode(node_id=2))
    assert c.p("pair", 0).leader == -1
    # Asking again changes nothing; once the session expires, it is fenced.
    c.ok(api.ControlledShutdown(node_id=1, node_epoch=1))
    assert c.last.records == []
    c.tick(c.config.node_session_timeout_ms)
    assert c.shard.image.node(1).fenced  # type: ignore[union-attr]
    c.check()


def test_controlled_shutdown_needs_the_current_epoch() -> None:
    c = Cluster()
    c.add_nodes([1])
    c.fails(api.ControlledShutdown(node_id=1, node_epoch=5), ErrorCode.STALE_BROKER_EPOCH)
    c.fails(api.ControlledShutdown(node_id=2, node_epoch=1), ErrorCode.STALE_BROKER_EPOCH)


def test_a_new_incarnation_after_shutdown_comes_back_clean() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.ok(api.ControlledShutdown(node_id=1, node_epoch=1))
    c.register(1, incarnation="again")
    node = c.shard.image.node(1)
    assert node is not None and not node.shutting_down and not node.fenced
    assert node.node_epoch == 2
    c.caught_up(1, "t")
    assert c.p("t").isr == (2, 1)


def test_a_fencing_answers_with_the_new_leaders_then_shrinks_the_isrs_it_followed() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    request = Request(RequestRef("test", 99), "FenceNode", api.FenceNode(node_id=1))
    first = c.shard.handle(request, c.now)
    for record in first.records:
        c.shard.replay(record)
        c.log.append(record)
    # The reply's batch: the decision, the node and the partition it led; t-1 it only
    # followed.
    assert [type(r.key).__name__ for r in first.records] == [
        "DecisionKey", "NodeKey", "PartitionKey"]  # fmt: skip
    assert (c.p("t", 0).leader, c.p("t", 0).isr) == (2, (2, 3))
    assert c.p("t", 1).isr == (2, 3, 1)
    assert not c.shard.fire_timers(c.now).records  # not before the first batch is durable

    # The controller fails over before the first batch's actions ran: the next one
    # finishes the fencing on load.
    successor = Cluster(log=c.log, controller_id=1001)
    assert successor.p("t", 1).isr == (2, 3)
    assert successor.shard.image.in_isr_of(1) == set()

    first.committed()  # or it stays: the shrink follows in a batch of its own
    second = c.tick()
    shrunk = [(v.topic, v.partition, v.isr) for v in c.partition_records(second) if v]
    assert shrunk == [("t", 1, (2, 3))]
    c.check()


def test_a_session_expiry_is_logged_only_once_its_fencing_is_durable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deposed controller resuming from a pause fires its overdue timers before its
    append is fenced: it must not log fencings that never happen."""
    c = Cluster()
    c.add_nodes([1])
    c.now += c.config.node_session_timeout_ms
    caplog.set_level(logging.INFO)
    result = c.shard.fire_timers(c.now)
    replay_result(c.shard, result)
    assert [v.fenced for v in (r.value for r in result.records) if isinstance(v, NodeValue)]
    assert "session expired" not in caplog.text
    result.committed()  # durable
    assert "node 1 session expired: fenced" in caplog.text
