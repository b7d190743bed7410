"""ElectLeaders and the auto leader rebalance (Kafka's checkAndTriggerAutoLeaderRebalance),
with each of its preconditions."""

from __future__ import annotations

from kafkacoord.coordinator.controller.leadership import REBALANCE_TIMER
from kafkacoord.coordinator.protocol import ErrorCode, TopicPartitionRef
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster, quiet_config

INTERVAL = 300_000


def displaced(**config: object) -> Cluster:
    """t-0 prefers node 1 but node 2 leads it; node 1 is back and in sync."""
    c = Cluster(quiet_config(**config))  # type: ignore[arg-type]
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    c.caught_up(1, "t", 0)
    c.caught_up(1, "t", 1)
    c.caught_up(1, "t", 2)
    assert c.p("t", 0).leader == 2
    return c


def elect(c: Cluster, kind: str, *refs: tuple[str, int]) -> list[tuple[str, int, ErrorCode]]:
    partitions = [TopicPartitionRef(topic=t, partition=p) for t, p in refs] if refs else None
    reply = c.ok(api.ElectLeaders(election_type=kind, partitions=partitions))  # type: ignore[arg-type]
    return [(r.topic, r.partition, r.error) for r in reply.results]


# -- ElectLeaders: preferred ---------------------------------------------------------------------


def test_preferred_election_on_listed_partitions() -> None:
    c = displaced()
    assert elect(c, "preferred", ("t", 0), ("t", 1), ("t", 7), ("x", 0)) == [
        ("t", 0, ErrorCode.NONE),
        ("t", 1, ErrorCode.ELECTION_NOT_NEEDED),
        ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("x", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    value = c.p("t", 0)
    assert (value.leader, value.election, value.leader_epoch) == (1, "preferred", 2)
    assert value.isr == (2, 3, 1)  # unchanged


def test_preferred_leader_must_be_live_and_in_sync() -> None:
    c = displaced()
    c.caught_up(1, "t", 0, caught_up=False)
    reply = c.ok(
        api.ElectLeaders(
            election_type="preferred", partitions=[TopicPartitionRef(topic="t", partition=0)]
        )
    )
    [result] = reply.results
    assert result.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert "not live or not in the ISR" in (result.message or "")
    c.caught_up(1, "t", 0)
    c.ok(api.FenceNode(node_id=1))
    assert elect(c, "preferred", ("t", 0)) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]


def test_preferred_election_on_every_partition_skips_those_not_needing_one() -> None:
    c = displaced()
    assert elect(c, "preferred") == [("t", 0, ErrorCode.NONE)]
    assert elect(c, "preferred") == []


# -- ElectLeaders: unclean -----------------------------------------------------------------------


def test_unclean_election() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2], 1: [2, 1]})
    assert elect(c, "unclean", ("t", 0)) == [("t", 0, ErrorCode.ELECTION_NOT_NEEDED)]
    c.caught_up(2, "t", 0, caught_up=False)
    c.ok(api.FenceNode(node_id=1))
    assert c.p("t", 0).leader == -1
    assert elect(c, "unclean") == [("t", 0, ErrorCode.NONE)]
    value = c.p("t", 0)
    assert (value.leader, value.isr, value.election) == (2, (2,), "unclean")
    c.check()


def test_unclean_election_needs_a_live_replica() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1]})
    c.ok(api.FenceNode(node_id=1))
    assert elect(c, "unclean", ("t", 0)) == [("t", 0, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)]
    assert c.last.records == []


# -- auto leader rebalance -----------------------------------------------------------------------


def test_auto_rebalance_moves_leadership_back_to_the_preferred_replica() -> None:
    c = displaced(auto_leader_rebalance_enable=True)
    start = c.now
    c.run_for(INTERVAL - 1, [1, 2, 3])
    assert c.p("t", 0).leader == 2
    c.run_for(1, [1, 2, 3])
    assert c.p("t", 0).leader == 1 and c.p("t", 0).election == "preferred"
    assert c.shard.timers.deadline(REBALANCE_TIMER) == start + 2 * INTERVAL
    c.check()


def test_auto_rebalance_disabled() -> None:
    c = displaced()
    assert REBALANCE_TIMER not in c.shard.timers
    c.run_for(INTERVAL, [1, 2, 3])
    assert c.p("t", 0).leader == 2


def test_auto_rebalance_needs_the_preferred_replica_live() -> None:
    c = displaced(auto_leader_rebalance_enable=True)
    c.ok(api.ControlledShutdown(node_id=1, node_epoch=1))
    c.run_for(INTERVAL, [2, 3])
    assert c.p("t", 0).leader == 2


def test_auto_rebalance_needs_the_preferred_replica_in_sync() -> None:
    c = displaced(auto_leader_rebalance_enable=True)
    c.caught_up(1, "t", 0, caught_up=False)
    c.run_for(INTERVAL, [1, 2, 3])
    assert c.p("t", 0).leader == 2


def test_auto_rebalance_skips_partitions_being_reassigned() -> None:
    c = displaced(auto_leader_rebalance_enable=True)
    c.register(4)
    c.ok(
        api.AlterReassignments(
            reassignments=[api.ReassignmentTarget(topic="t", partition=0, replicas=[1, 2, 4])]
        )
    )
    c.run_for(INTERVAL, [1, 2, 3, 4])
    assert c.p("t", 0).leader == 2


def test_auto_rebalance_skips_and_ignores_deleting_topics() -> None:
    c = displaced(auto_leader_rebalance_enable=True, topic_deletion_delay_ms=10 * INTERVAL)
    c.ok(api.DeleteTopic(name="t"))
    c.run_for(INTERVAL, [1, 2, 3])
    assert all(r.value is None or r.value.controller_epoch >= 0 for r in c.last.records)
    assert c.last.records == []


def test_auto_rebalance_respects_the_threshold() -> None:
    c = Cluster(quiet_config(auto_leader_rebalance_enable=True))
    c.add_nodes([1, 2])
    # Node 1 prefers 10 partitions and leads 9 of them: 10 % is not above 10 %.
    c.create("t", assignment={p: [1, 2] for p in range(10)})
    c.caught_up(2, "t", 0)
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    for p in range(1, 10):
        c.caught_up(1, "t", p)
    c.ok(
        api.ElectLeaders(
            election_type="preferred",
            partitions=[TopicPartitionRef(topic="t", partition=p) for p in range(1, 10)],
        )
    )
    c.caught_up(1, "t", 0)
    assert [c.p("t", p).leader for p in range(10)] == [2] + [1] * 9
    c.run_for(INTERVAL, [1, 2])
    assert c.p("t", 0).leader == 2
    # With a lower threshold it fires.
    low = Cluster(
        quiet_config(auto_leader_rebalance_enable=True, leader_imbalance_per_broker_percentage=5),
        log=list(c.log),
        now_ms=c.now,
    )
    low.node_epochs = dict(c.node_epochs)
    low.run_for(INTERVAL, [1, 2])
    assert low.p("t", 0).leader == 1


def test_auto_rebalance_is_capped_and_continues_soon() -> None:
    c = Cluster(
        quiet_config(
            auto_leader_rebalance_enable=True,
            max_rebalance_elections_per_run=2,
            rebalance_continue_delay_ms=50,
        )
    )
    c.add_nodes([1, 2])
    c.create("t", assignment={p: [1, 2] for p in range(5)})
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    for p in range(5):
        c.caught_up(1, "t", p)
    c.run_for(INTERVAL, [1, 2])
    assert [c.p("t", p).leader for p in range(5)] == [1, 1, 2, 2, 2]
    assert c.shard.timers.deadline(REBALANCE_TIMER) == c.now + 50
    c.tick(50)
    c.tick(50)
    assert [c.p("t", p).leader for p in range(5)] == [1] * 5
    assert c.shard.timers.deadline(REBALANCE_TIMER) == c.now + INTERVAL
    c.check()
