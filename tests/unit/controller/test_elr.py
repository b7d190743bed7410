"""Eligible Leader Replicas (KIP-966), case by case, through the controller shard.

Each case follows one of the KIP's: the ISR shrinking below min.insync.replicas, an
empty ISR, election from the ELR, an unclean shutdown leaving it, the last known leader,
and the ISR at full size again clearing it.
"""

from __future__ import annotations

from kafkacoord.codecs.models import PartitionState, PartitionValue
from kafkacoord.coordinator.controller.elr import next_elr, without_replica
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster, replayed


def min_isr_two() -> Cluster:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    return c


def state(c: Cluster) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    p = c.p("t")
    return p.leader, p.isr, p.elr, p.last_known_elr


def test_replicas_leaving_an_isr_below_min_isr_become_eligible() -> None:
    c = min_isr_two()
    c.ok(api.FenceNode(node_id=3))
    assert state(c) == (1, (1, 2), (), ())  # still at min ISR: nobody is eligible
    c.ok(api.FenceNode(node_id=2))
    assert state(c) == (1, (1,), (2,), ())  # below it: node 2 holds every committed record
    c.ok(api.FenceNode(node_id=1))
    leader, isr, elr, _ = state(c)
    assert (leader, isr, elr) == (-1, (), (2, 1))  # the ISR may be empty now
    assert c.p("t").state is PartitionState.OFFLINE
    # The log replays to the same ELR: it is state, not a cache.
    assert replayed(c.log).snapshot() == c.shard.image.snapshot()


def test_a_returning_eligible_replica_leads_cleanly() -> None:
    c = min_isr_two()
    for node in (3, 2, 1):
        c.ok(api.FenceNode(node_id=node))
    c.heartbeat(2)  # unfenced: the first live ELR member in replica order
    p = c.p("t")
    assert (p.leader, p.isr, p.elr, p.election) == (2, (2,), (1,), "elr")
    assert p.state is PartitionState.ONLINE
    # Node 1 comes back and catches up: the ISR is at min ISR again, the ELR is cleared.
    c.heartbeat(1)
    c.caught_up(1, "t")
    assert state(c) == (2, (2, 1), (), ())


def test_an_unclean_shutdown_leaves_the_elr() -> None:
    c = min_isr_two()
    for node in (3, 2, 1):
        c.ok(api.FenceNode(node_id=node))
    # Node 2 restarts without a controlled shutdown: its log may have lost its tail.
    c.register(2, incarnation="inc-2-after-crash")
    assert state(c) == (-1, (), (1,), ())
    assert c.p("t").leader == -1  # live, but not eligible: no clean leader
    c.heartbeat(1)
    assert state(c)[:2] == (1, (1,))


def test_a_controlled_shutdown_keeps_eligibility() -> None:
    c = min_isr_two()
    c.ok(api.FenceNode(node_id=3))
    c.ok(api.ControlledShutdown(node_id=2, node_epoch=c.node_epochs[2]))
    assert state(c)[:3] == (1, (1,), (2,))
    c.register(2, incarnation="inc-2-restarted")  # after a clean shutdown
    assert 2 in c.p("t").elr


def test_the_last_known_leader_is_the_last_resort() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1]})
    c.ok(api.FenceNode(node_id=1))
    assert state(c) == (-1, (), (1,), ())
    # It crashed: no longer eligible, but remembered as the last leader.
    c.register(1, incarnation="inc-1-after-crash", heartbeat=False)
    assert state(c) == (-1, (), (), (1,))
    c.heartbeat(1)
    p = c.p("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (), ())
    assert p.election == "last_known_leader"


def test_unclean_election_stays_last_and_opt_in() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    configs = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    c.create("t", assignment={0: [1, 2]}, configs=configs)
    c.caught_up(2, "t", caught_up=False)
    assert state(c) == (1, (1,), (2,), ())  # left below min ISR: eligible
    c.register(2, incarnation="inc-2-after-crash")  # ...until it crashed
    c.heartbeat(2)
    c.ok(api.FenceNode(node_id=1))
    p = c.p("t")
    # No ISR, no ELR, the last known leader is fenced: only unclean election is left.
    assert (p.leader, p.election) == (2, "unclean")


def test_next_elr_rules() -> None:
    old = PartitionValue("t", 0, PartitionState.ONLINE, (1, 2, 3), (1, 2, 3), 1, 0, 0, 0, 0)
    assert next_elr(old, (1, 2, 3), (1, 2), 2) == ((), ())
    assert next_elr(old, (1, 2, 3), (1,), 2) == ((2, 3), ())
    shrunk = PartitionValue("t", 0, PartitionState.ONLINE, (1, 2, 3), (1,), 1, 0, 0, 0, 0,
                            elr=(2, 3))  # fmt: skip
    assert next_elr(shrunk, (1, 2, 3), (1, 3), 2) == ((), ())  # back at min ISR
    assert next_elr(shrunk, (1, 2), (1,), 2) == ((2,), ())  # 3 is no longer a replica
    assert next_elr(shrunk, (1, 2, 3), (), 2) == ((2, 3, 1), ())
    assert without_replica(shrunk.elr, shrunk.last_known_elr, shrunk.isr, 4) is None
    assert without_replica(shrunk.elr, shrunk.last_known_elr, shrunk.isr, 2) == ((3,), ())


def test_changing_min_isr_clears_the_elr() -> None:
    c = min_isr_two()
    c.ok(api.FenceNode(node_id=3))
    c.ok(api.FenceNode(node_id=2))
    assert c.p("t").elr == (2,)
    epoch = c.p("t").partition_epoch
    # Another config leaves it alone; a new minimum clears it (KIP-966).
    same = c.ok(api.AlterTopicConfigs(topic="t", set_configs={"retention.ms": "1000"}))
    assert same.elr_cleared == 0 and c.p("t").elr == (2,)
    changed = c.ok(api.AlterTopicConfigs(topic="t", set_configs={"min.insync.replicas": "3"}))
    assert changed.elr_cleared == 1
    assert (c.p("t").elr, c.p("t").last_known_elr) == ((), ())
    assert c.p("t").partition_epoch == epoch + 1
    assert c.shard.image.topic("t").configs["min.insync.replicas"] == "3"  # type: ignore[union-attr]
    assert replayed(c.log).snapshot() == c.shard.image.snapshot()


def test_topic_config_changes_are_validated_and_can_be_dry_runs() -> None:
    from kafkacoord.coordinator.protocol import ErrorCode

    c = min_isr_two()
    c.fails(api.AlterTopicConfigs(topic="t", set_configs={"min.insync.replicas": "0"}),
            ErrorCode.INVALID_CONFIG)  # fmt: skip
    c.fails(api.AlterTopicConfigs(topic="nope", set_configs={"a": "b"}),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # fmt: skip
    c.fails(api.AlterTopicConfigs(topic="t", set_configs={"a": "b"}, delete_configs=["a"]),
            ErrorCode.INVALID_REQUEST)  # fmt: skip
    dry = c.ok(api.AlterTopicConfigs(topic="t", delete_configs=["min.insync.replicas"],
                                     validate_only=True))  # fmt: skip
    assert dry.configs == {} and not c.last.records
    c.ok(api.AlterTopicConfigs(topic="t", delete_configs=["min.insync.replicas"]))
    assert c.shard.image.topic("t").configs == {}  # type: ignore[union-attr]
