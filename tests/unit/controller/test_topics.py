"""Topics: create (AdminUtils placement), add partitions, queued deletion, internal topics."""

from __future__ import annotations

import random

import pytest

from kafkacoord.codecs.models import PartitionKey, PartitionState, TopicKey, TopicValue
from kafkacoord.coordinator.controller.config import ControllerConfig, InternalTopicSpec
from kafkacoord.coordinator.controller.placement import assign_replicas
from kafkacoord.coordinator.controller.states import ReplicaState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

from .support import START_MS, Cluster, quiet_config


def cluster(nodes: range | list[int] = range(1, 4), seed: int = 7, **config: object) -> Cluster:
    c = Cluster(quiet_config(**config), seed=seed)  # type: ignore[arg-type]
    c.add_nodes(nodes)
    return c


# -- create ------------------------------------------------------------------------------------


def test_create_places_like_admin_utils_and_brings_partitions_online() -> None:
    c = cluster(range(1, 6), seed=11)
    reply = c.create("t", 7, 3, configs={"min.insync.replicas": "2"})
    expected = assign_replicas(dict.fromkeys(range(1, 6)), 7, 3, rng=random.Random(11))
    assert reply.assignment == expected
    keys = c.record_keys()
    assert keys[0] == TopicKey("t")
    assert keys[1:] == [PartitionKey("t", p) for p in range(7)]
    topic = c.shard.image.topic("t")
    assert topic == TopicValue(
        "t", reply.topic_id, 7, 3, START_MS, c.shard.epoch, {"min.insync.replicas": "2"}
    )
    for p, replicas in expected.items():
        value = c.p("t", p)
        assert value.replicas == tuple(replicas) == value.isr
        assert (value.leader, value.state, value.election) == (
            replicas[0],
            PartitionState.ONLINE,
            "initial",
        )
        assert (value.leader_epoch, value.partition_epoch) == (0, 0)
    c.check()


def test_create_rack_aware_by_default() -> None:
    c = Cluster(quiet_config(), seed=3)
    for node, rack in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]:
        c.register(node, rack=rack)
    reply = c.create("t", 6, 3)
    racks = {n: c.shard.image.node(n).rack for n in range(1, 7)}  # type: ignore[union-attr]
    assert reply.assignment == assign_replicas(racks, 6, 3, rng=random.Random(3))
    for replicas in reply.assignment.values():
        assert len({racks[r] for r in replicas}) == 3


def test_mixed_racks_are_rejected_unless_rack_unaware() -> None:
    c = Cluster(quiet_config())
    c.register(1, rack="a")
    c.register(2)
    message = c.fails(
        api.CreateTopic(name="t", num_partitions=1, replication_factor=2),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    )
    assert "rack" in message
    c.ok(api.CreateTopic(name="t", num_partitions=1, replication_factor=2, rack_aware=False))


def test_replication_factor_larger_than_live_nodes() -> None:
    c = cluster(range(1, 4))
    c.register(4, heartbeat=False)  # fenced: not a placement target
    message = c.fails(
        api.CreateTopic(name="t", num_partitions=1, replication_factor=4),
        ErrorCode.INVALID_REPLICATION_FACTOR,
    )
    assert message == "replication factor 4 is larger than the 3 live service nodes"
    c.ok(api.CreateTopic(name="t", num_partitions=1, replication_factor=3))


def test_no_live_node_at_all() -> None:
    c = Cluster()
    message = c.fails(api.CreateTopic(name="t"), ErrorCode.INVALID_REPLICATION_FACTOR)
    assert "0 live service nodes" in message
    assert "python examples/replicated_service.py --node-id 1" in message


@pytest.mark.parametrize(
    ("partitions", "factor", "code"),
    [
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        (1, -3, ErrorCode.INVALID_REPLICATION_FACTOR),
        (0, 1, ErrorCode.INVALID_PARTITIONS),
        (-2, 1, ErrorCode.INVALID_PARTITIONS),
    ],
)
def test_create_rejects_bad_counts(partitions: int, factor: int, code: ErrorCode) -> None:
    c = cluster()
    c.fails(api.CreateTopic(name="t", num_partitions=partitions, replication_factor=factor), code)


def test_create_defaults_from_config() -> None:
    c = cluster(default_num_partitions=4, default_replication_factor=2)
    reply = c.ok(api.CreateTopic(name="t"))
    assert len(reply.assignment) == 4
    assert all(len(r) == 2 for r in reply.assignment.values())


def test_create_with_explicit_assignment() -> None:
    c = cluster(range(1, 5))
    reply = c.create("t", assignment={0: [4, 1], 1: [2, 3]})
    assert reply.assignment == {0: [4, 1], 1: [2, 3]}
    assert c.p("t", 0).leader == 4
    assert c.shard.image.topic("t").replication_factor == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ({0: [1], 2: [2]}, "partitions 0..1"),
        ({1: [1]}, "partitions 0..0"),
        ({0: []}, "empty replica list"),
        ({0: [1, 1]}, "duplicate"),
        ({0: [1, 9]}, "unknown nodes [9]"),
        ({0: [1, 2], 1: [3]}, "inconsistent replication factor"),
    ],
)
def test_explicit_assignment_is_validated(assignment: dict[int, list[int]], fragment: str) -> None:
    c = cluster()
    message = c.fails(
        api.CreateTopic(name="t", replica_assignment=assignment),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    )
    assert fragment in message


def test_explicit_assignment_excludes_counts() -> None:
    c = cluster()
    c.fails(
        api.CreateTopic(name="t", num_partitions=1, replica_assignment={0: [1]}),
        ErrorCode.INVALID_REQUEST,
    )
    c.fails(api.CreateTopic(name="t", replica_assignment={}), ErrorCode.INVALID_PARTITIONS)


def test_create_name_and_config_errors() -> None:
    c = cluster(internal_topics=(InternalTopicSpec("__kc_offsets", 2, 1),))
    c.create("t")
    assert "already exists" in c.fails(api.CreateTopic(name="t"), ErrorCode.TOPIC_ALREADY_EXISTS)
    c.fails(api.CreateTopic(name=".."), ErrorCode.INVALID_TOPIC_EXCEPTION)
    c.fails(api.CreateTopic(name="__kc_offsets"), ErrorCode.INVALID_TOPIC_EXCEPTION)
    c.fails(
        api.CreateTopic(name="u", configs={"min.insync.replicas": "0"}), ErrorCode.INVALID_CONFIG
    )
    c.fails(
        api.CreateTopic(name="u", configs={"unclean.leader.election.enable": "maybe"}),
        ErrorCode.INVALID_CONFIG,
    )


def test_validate_only_writes_nothing() -> None:
    c = cluster()
    reply = c.ok(
        api.CreateTopic(name="t", num_partitions=2, replication_factor=2, validate_only=True)
    )
    assert len(reply.assignment) == 2 and reply.topic_id == ""
    assert c.last.records == []
    assert c.shard.image.topic("t") is None


# -- add partitions ----------------------------------------------------------------------------


def test_create_partitions_continues_the_layout() -> None:
    c = cluster(range(1, 6))
    c.create("t", assignment={0: [3, 4], 1: [4, 5]})
    reply = c.ok(api.CreatePartitions(topic="t", count=5))
    # Kafka starts at the index of partition 0's first replica among the live nodes.
    expected = assign_replicas(
        dict.fromkeys(range(1, 6)), 3, 2, fixed_start_index=2, start_partition_id=2
    )
    assert reply.assignment == expected
    assert c.shard.image.topic("t").num_partitions == 5  # type: ignore[union-attr]
    assert [c.p("t", p).replicas for p in range(2, 5)] == [tuple(expected[p]) for p in range(2, 5)]
    c.check()


def test_create_partitions_with_assignment_and_errors() -> None:
    c = cluster(range(1, 4), internal_topics=(InternalTopicSpec("__kc_offsets", 2, 1),))
    c.create("t", assignment={0: [1, 2]})
    c.fails(api.CreatePartitions(topic="nope", count=2), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert "already has 1" in c.fails(
        api.CreatePartitions(topic="t", count=1), ErrorCode.INVALID_PARTITIONS
    )
    c.fails(
        api.CreatePartitions(topic="t", count=3, assignment=[[1, 2]]),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    )
    c.fails(
        api.CreatePartitions(topic="t", count=2, assignment=[[1]]),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    )
    c.fails(
        api.CreatePartitions(topic="t", count=2, assignment=[[1, 7]]),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    )
    reply = c.ok(api.CreatePartitions(topic="t", count=2, assignment=[[3, 1]], validate_only=True))
    assert reply.assignment == {1: [3, 1]} and c.last.records == []
    c.ok(api.CreatePartitions(topic="t", count=2, assignment=[[3, 1]]))
    assert c.p("t", 1).leader == 3
    c.heartbeat(1)
    c.fails(api.CreatePartitions(topic="__kc_offsets", count=9), ErrorCode.INVALID_PARTITIONS)


# -- delete ------------------------------------------------------------------------------------


def test_delete_queues_then_tombstones_on_the_next_tick() -> None:
    c = cluster(range(1, 4))
    c.create("t", assignment={0: [1, 2], 1: [2, 3]})
    c.ok(api.DeleteTopic(name="t"))
    topic = c.shard.image.topic("t")
    assert topic is not None and topic.deleting
    for p in (0, 1):
        value = c.p("t", p)
        assert (value.state, value.leader, value.leader_epoch) == (PartitionState.OFFLINE, -1, 1)
        for r in value.replicas:
            state = c.shard.replica_states.state("t", p, r, value, c.shard.image.live_nodes())
            assert state is ReplicaState.DELETION_STARTED
    assert c.shard.next_deadline_ms() == c.now
    c.tick()
    assert c.record_keys() == [PartitionKey("t", 0), PartitionKey("t", 1), TopicKey("t")]
    assert all(r.value is None for r in c.last.records)
    assert c.shard.image.topic("t") is None and c.shard.image.partition_count() == 0
    assert not c.shard.replica_states.has_explicit()
    c.create("t")  # the name is free again
    c.check()


def test_delete_waits_for_the_configured_delay() -> None:
    c = cluster(topic_deletion_delay_ms=5000)
    c.create("t")
    c.ok(api.DeleteTopic(name="t"))
    assert c.tick(4999).records == []
    assert len(c.tick(1).records) == 2


def test_delete_errors_and_idempotence() -> None:
    c = cluster(internal_topics=(InternalTopicSpec("__kc_offsets", 1, 1),))
    c.fails(api.DeleteTopic(name="t"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    c.heartbeat(1)
    c.create("t")
    c.ok(api.DeleteTopic(name="t"))
    c.ok(api.DeleteTopic(name="t"))
    assert c.last.records == []
    c.fails(api.DeleteTopic(name="__kc_offsets"), ErrorCode.INVALID_TOPIC_EXCEPTION)


def test_a_deleting_topic_is_left_alone() -> None:
    c = cluster(range(1, 4), topic_deletion_delay_ms=10_000)
    c.create("t", assignment={0: [1, 2]})
    c.ok(api.DeleteTopic(name="t"))
    before = c.p("t")
    c.ok(api.FenceNode(node_id=1))
    c.heartbeat(1)
    assert c.p("t") == before  # neither fencing nor unfencing touches it
    c.fails(
        api.ReplicaStatus(
            node_id=2, node_epoch=1, topic="t", partition=0, leader_epoch=1, caught_up=True
        ),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    reply = c.ok(
        api.AlterReassignments(
            reassignments=[api.ReassignmentTarget(topic="t", partition=0, replicas=[3])]
        )
    )
    assert reply.results[0].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    message = c.fails(
        api.CreatePartitions(topic="t", count=3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert "being deleted" in message
    assert c.ok(api.ElectLeaders(election_type="unclean")).results == []
    assert c.fails(api.CreateTopic(name="t"), ErrorCode.TOPIC_ALREADY_EXISTS).endswith(
        "marked for deletion"
    )


def test_delete_clears_a_reassignment_and_resumes_after_failover() -> None:
    c = cluster(range(1, 4), topic_deletion_delay_ms=10_000)
    c.create("t", assignment={0: [1, 2]})
    c.ok(
        api.AlterReassignments(
            reassignments=[api.ReassignmentTarget(topic="t", partition=0, replicas=[3, 2])]
        )
    )
    assert c.p("t").reassignment is not None
    c.ok(api.DeleteTopic(name="t"))
    assert c.p("t").reassignment is None and c.shard.image.reassigning() == set()
    successor = c.failover()
    value = successor.p("t")
    live = successor.shard.image.live_nodes()
    assert all(
        successor.shard.replica_states.state("t", 0, r, value, live)
        is ReplicaState.DELETION_STARTED
        for r in value.replicas
    )
    successor.tick()
    assert successor.shard.image.topic("t") is None
    successor.check()


# -- internal topics ---------------------------------------------------------------------------


OFFSETS = InternalTopicSpec("__kc_offsets", 4, 3)


def test_internal_topic_waits_for_a_node_with_its_role() -> None:
    c = Cluster(quiet_config(internal_topics=(OFFSETS,)))
    c.add_nodes([1, 2])  # plain service nodes
    assert c.shard.image.topic("__kc_offsets") is None
    c.register(10, roles=["coordinator"])
    topic = c.shard.image.topic("__kc_offsets")
    assert topic is not None
    assert topic.replication_factor == 1 and topic.num_partitions == 4
    assert topic.configs["unclean.leader.election.enable"] == "true"
    assert all(c.p("__kc_offsets", p).replicas == (10,) for p in range(4))


def test_internal_topic_replication_grows_with_its_nodes() -> None:
    c = Cluster(quiet_config(internal_topics=(OFFSETS,)))
    c.add_nodes([1, 2])
    c.register(10, roles=["coordinator"])
    c.register(11, roles=["coordinator"])
    assert c.shard.image.topic("__kc_offsets").replication_factor == 2  # type: ignore[union-attr]
    for p in range(4):
        value = c.p("__kc_offsets", p)
        assert value.replicas == (10, 11) and value.reassignment is not None
        c.caught_up(11, "__kc_offsets", p)
        assert c.p("__kc_offsets", p).replicas == (10, 11)
        assert c.p("__kc_offsets", p).reassignment is None
    c.register(12, roles=["coordinator"])
    c.register(13, roles=["coordinator"])  # beyond the configured factor: no growth
    for p in range(4):
        c.caught_up(12, "__kc_offsets", p)
    replicas = [c.p("__kc_offsets", p).replicas for p in range(4)]
    assert all(len(r) == 3 and set(r) <= {10, 11, 12, 13} for r in replicas)
    assert c.shard.image.topic("__kc_offsets").replication_factor == 3  # type: ignore[union-attr]
    # Service nodes never host it; reassigning it there is refused.
    reply = c.ok(
        api.AlterReassignments(
            reassignments=[api.ReassignmentTarget(topic="__kc_offsets", partition=0, replicas=[1])]
        )
    )
    assert reply.results[0].error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "role 'coordinator'" in (reply.results[0].message or "")
    c.check()


def test_internal_topic_is_created_by_a_new_controller() -> None:
    c = Cluster(quiet_config())
    c.register(10, roles=["coordinator"])
    configured = Cluster(quiet_config(internal_topics=(OFFSETS,)), log=list(c.log))
    assert configured.shard.image.topic("__kc_offsets") is not None
    assert configured.p("__kc_offsets", 3).leader == 10


def test_internal_topic_fails_over_uncleanly() -> None:
    c = Cluster(quiet_config(internal_topics=(InternalTopicSpec("__kc_offsets", 1, 2),)))
    c.register(10, roles=["coordinator"])
    c.register(11, roles=["coordinator"])
    c.ok(api.FenceNode(node_id=10))  # 11 never caught up
    value = c.p("__kc_offsets")
    assert value.leader == 11 and value.election == "unclean"


def test_user_topics_are_placed_on_service_nodes_not_on_daemons() -> None:
    c = Cluster(ControllerConfig(internal_topics=(InternalTopicSpec("__kc_offsets", 3, 2),)))
    c.add_nodes([1, 2, 3])
    c.register(100, roles=["coordinator"])
    c.register(101, roles=["coordinator"])
    created = c.create("t", 12, 3)
    assert {n for replicas in created.assignment.values() for n in replicas} == {1, 2, 3}
    message = c.fails(
        api.CreateTopic(name="u", num_partitions=1, replication_factor=4),
        ErrorCode.INVALID_REPLICATION_FACTOR,
    )
    assert message == "replication factor 4 is larger than the 3 live service nodes"
    # The daemons still host the group shards.
    offsets = c.shard.image.partitions_of("__kc_offsets")
    assert {n for v in offsets for n in v.replicas} == {100, 101}


def test_adding_more_partitions_than_one_request_may_is_a_policy_violation() -> None:
    # The edge bounds count to an int32: growing a topic by two billion partitions would
    # hold the controller for ever, so the handler caps what one request adds, as Kafka.
    c = cluster(range(1, 4))
    c.create("t", assignment={0: [1, 2]})
    message = c.fails(api.CreatePartitions(topic="t", count=2**31 - 1), ErrorCode.POLICY_VIOLATION)
    assert "10000 per request" in message
    assert c.shard.image.topic("t").num_partitions == 1  # type: ignore[union-attr]
    c.ok(api.CreatePartitions(topic="t", count=10_001))
    assert c.shard.image.topic("t").num_partitions == 10_001  # type: ignore[union-attr]
