"""MetadataImage: replay with controller-epoch fencing, indexes and read-only queries."""

from __future__ import annotations

import pytest

from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    DecisionKey,
    DecisionValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
    TopicKey,
    TopicValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record


def controller(epoch: int) -> Record:
    return Record(ControllerKey(), ControllerValue(epoch, 1, "c", 0))


def node(node_id: int, epoch: int = 0, *, fenced: bool = False, down: bool = False,
         roles: tuple[str, ...] = ()) -> Record:  # fmt: skip
    return Record(
        NodeKey(node_id),
        NodeValue(node_id, f"i{node_id}", 1, fenced, 0, epoch, shutting_down=down, roles=roles),
    )


def topic(name: str, partitions: int = 1, epoch: int = 0, **configs: str) -> Record:
    return Record(TopicKey(name), TopicValue(name, "id", partitions, 3, 0, epoch, dict(configs)))


def part(
    name: str,
    p: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    *,
    epoch: int = 0,
    reassignment: Reassignment | None = None,
) -> Record:
    state = PartitionState.ONLINE if leader >= 0 else PartitionState.OFFLINE
    value = PartitionValue(name, p, state, replicas, isr, leader, 0, 0, 0, epoch, reassignment)
    return Record(PartitionKey(name, p), value)


def image_of(*records: Record) -> MetadataImage:
    image = MetadataImage()
    for record in records:
        image.replay(record)
    return image


# -- StaleControllerEpoch ---------------------------------------------------------------------


def test_decisions_of_an_older_controller_are_ignored() -> None:
    image = image_of(controller(1), topic("t", epoch=1), part("t", 0, (1, 2), (1, 2), 1, epoch=1))
    assert image.replay(controller(2))
    # A zombie of epoch 1 writes late: ignored.
    assert not image.replay(part("t", 0, (1, 2), (2,), 2, epoch=1))
    assert not image.replay(node(5, epoch=1))
    assert not image.replay(topic("u", epoch=1))
    assert image.partition("t", 0).leader == 1  # type: ignore[union-attr]
    assert image.node(5) is None and image.topic("u") is None
    assert image.ignored_stale == 3
    # The current epoch and newer ones apply.
    assert image.replay(part("t", 0, (1, 2), (2,), 2, epoch=2))
    assert image.partition("t", 0).leader == 2  # type: ignore[union-attr]


def test_an_older_controller_record_is_ignored() -> None:
    image = image_of(controller(3))
    assert not image.replay(controller(2))
    assert image.controller_epoch == 3
    assert image.replay(controller(3))
    assert image.replay(controller(4))
    assert image.controller_epoch == 4


def test_tombstones_carry_no_epoch_and_always_apply() -> None:
    image = image_of(controller(1), topic("t"), part("t", 0, (1,), (1,), 1, epoch=1), controller(5))
    assert image.replay(Record(PartitionKey("t", 0), None))
    assert image.replay(Record(TopicKey("t"), None))
    assert image.partition("t", 0) is None and image.topic("t") is None
    image.check_indexes()


def test_controller_tombstone_keeps_the_epoch_fence() -> None:
    image = image_of(controller(4))
    image.replay(Record(ControllerKey(), None))
    assert image.controller is None
    assert not image.replay(part("t", 0, (1,), (1,), 1, epoch=3))


def decision(epoch: int, sequence: int, decided_ms: int) -> Record:
    trigger = Trigger(TriggerKind.NODE_REGISTERED, node_id=1)
    return Record(DecisionKey(epoch, sequence), DecisionValue(trigger, decided_ms, epoch))


def test_decision_records_are_kept_as_their_ids_and_times() -> None:
    image = MetadataImage()
    image.replay(controller(2))
    for record in (decision(2, 0, 100), decision(2, 1, 200), decision(1, 9, 50)):
        image.replay(record)
    assert image.decisions == {(2, 0): 100, (2, 1): 200}  # epoch 1's was fenced
    image.replay(Record(DecisionKey(2, 0), None))
    assert image.decisions == {(2, 1): 200}


def test_unknown_record_type_is_an_error() -> None:
    with pytest.raises(TypeError):
        MetadataImage().apply(object(), None)  # type: ignore[arg-type]


# -- indexes ---------------------------------------------------------------------------------


def test_indexes_follow_leaders_isrs_and_replicas() -> None:
    image = image_of(
        topic("t", 3),
        part("t", 0, (1, 2, 3), (1, 2, 3), 1),
        part("t", 1, (2, 3, 4), (2, 3), 2),
        part("t", 2, (3, 4, 1), (3,), -1),
    )
    assert image.led_by(1) == {("t", 0)}
    assert image.in_isr_of(3) == {("t", 0), ("t", 1), ("t", 2)}
    assert image.replicas_on(4) == {("t", 1), ("t", 2)}
    assert image.leaderless() == {("t", 2)}
    image.replay(part("t", 2, (3, 4, 5), (3, 4), 4))
    image.replay(part("t", 0, (1, 2, 3), (2, 3), 2))
    assert image.led_by(1) == set() and image.led_by(2) == {("t", 0), ("t", 1)}
    assert image.replicas_on(1) == {("t", 0)}
    assert image.leaderless() == set()
    assert image.leader_counts() == {2: 2, 4: 1}
    moving = Reassignment((2, 3, 4), (5, 3, 4), (5,), (2,), "A2", 0)
    image.replay(part("t", 1, (5, 3, 4, 2), (2, 3), 2, reassignment=moving))
    assert image.reassigning() == {("t", 1)}
    image.replay(part("t", 1, (5, 3, 4), (3, 5), 5))
    assert image.reassigning() == set()
    image.replay(Record(PartitionKey("t", 1), None))
    assert image.in_isr_of(5) == set() and image.partition_ids("t") == {0, 2}
    image.check_indexes()


def test_node_indexes_built_on_first_use_match_replay_before_and_after() -> None:
    # A load replays without indexing by node; a node's sets are scanned for when first
    # asked for, and replay keeps them from there on.
    records = [
        part(f"t{i % 7}", i, (i % 5, (i + 1) % 5, (i + 2) % 5), (i % 5, (i + 2) % 5), i % 5)
        for i in range(60)
    ]
    image = image_of(*records)
    image.replay(part("t3", 3, (3, 4, 0), (4,), 4))  # changed before any index exists
    image.replay(Record(PartitionKey("t5", 5), None))  # and deleted
    image.replay(part("t9", 0, (1, 2), (), -1))  # leaderless
    assert image.leaderless() == {("t9", 0)}
    image.check_indexes()  # builds them, and compares with a recount
    assert image.led_by(4) == {(v.topic, v.partition) for v in image.all_partitions()
                               if v.leader == 4}  # fmt: skip
    image.replay(part("t9", 1, (4, 0), (4, 0), 4))  # new, once indexed
    image.replay(part("t3", 3, (3, 4, 0), (3, 4), 3))
    image.replay(Record(PartitionKey("t4", 4), None))
    assert ("t9", 1) in image.led_by(4) and ("t3", 3) in image.led_by(3)
    assert ("t4", 4) not in image.replicas_on(4)
    image.check_indexes()


# -- queries ---------------------------------------------------------------------------------


def test_live_nodes_and_roles() -> None:
    image = image_of(
        node(1, roles=("coordinator",)),
        node(2, fenced=True, roles=("coordinator",)),
        node(3, down=True),
        node(4),
    )
    assert image.live_nodes() == {1, 4}
    assert image.unfenced_nodes() == {1, 3, 4}
    assert image.is_live(1) and not image.is_live(3)
    assert image.nodes_with_role("coordinator") == [1]
    assert image.nodes_with_role("coordinator", live_only=False) == [1, 2]
    image.replay(node(4, fenced=True))
    assert image.live_nodes() == {1}


def test_describe_filters() -> None:
    moving = Reassignment((1, 2), (3, 4), (3, 4), (1, 2), "A2", 0)
    image = image_of(
        node(1),
        node(2),
        node(3, fenced=True),
        topic("a", 3, **{"min.insync.replicas": "2"}),
        topic("b", 1),
        part("a", 0, (1, 2, 3), (1, 2, 3), 1),
        part("a", 1, (1, 2, 3), (1, 2), 2),
        part("a", 2, (2, 3, 1), (3,), -1),
        part("b", 0, (3, 4, 1, 2), (1, 2, 3, 4), 1, reassignment=moving),
    )
    name = [(v.topic, v.partition) for v in image.under_replicated()]
    assert name == [("a", 1), ("a", 2)]  # b-0 has its 2 target replicas in sync
    assert [(v.topic, v.partition) for v in image.unavailable()] == [("a", 2)]
    assert [(v.topic, v.partition) for v in image.under_min_isr()] == [("a", 2)]
    assert [(v.topic, v.partition) for v in image.under_min_isr(default_min_isr=5)] == [
        ("a", 2),
        ("b", 0),
    ]
    assert [(v.topic, v.partition) for v in image.at_min_isr()] == [("a", 1)]
    assert [(v.topic, v.partition) for v in image.reassignments()] == [("b", 0)]
    assert [v.partition for v in image.partitions_of("a")] == [0, 1, 2]
    assert image.partition_count() == 4
    assert image.min_insync_replicas("a") == 2 and image.min_insync_replicas("b", 3) == 3


def test_unavailable_counts_a_fenced_leader() -> None:
    image = image_of(node(1, fenced=True), topic("t"), part("t", 0, (1,), (1,), 1))
    assert [v.partition for v in image.unavailable()] == [0]


def test_leader_imbalance_leaves_deleting_topics_out() -> None:
    deleting = TopicValue("d", "x", 1, 2, 0, 0, deleting=True)
    image = image_of(
        topic("t", 2),
        part("t", 0, (1, 2), (1, 2), 2),
        part("t", 1, (2, 1), (1, 2), 2),
        Record(TopicKey("d"), deleting),
        part("d", 0, (1, 2), (1, 2), 2),
    )
    assert image.leader_imbalance() == {1: 1.0, 2: 0.0}
    assert image.deleting_topics() == ["d"]


def test_topic_settings() -> None:
    image = image_of(
        topic("u", **{"unclean.leader.election.enable": "TRUE", "min.insync.replicas": "x"}),
        topic("c"),
    )
    assert image.unclean_enabled("u") and not image.unclean_enabled("c")
    assert image.unclean_enabled("c", default=True) and not image.unclean_enabled("nope")
    assert image.min_insync_replicas("u") == 1  # unparsable: the default


def test_snapshot_compares_everything() -> None:
    records = [controller(1), node(1, 1), topic("t", 1, 1), part("t", 0, (1,), (1,), 1, epoch=1)]
    assert image_of(*records).snapshot() == image_of(*records).snapshot()
    assert image_of(*records).snapshot() != image_of(*records[:-1]).snapshot()


def test_leaders_or_isr_members_by_scan_before_the_indexes_and_by_index_after() -> None:
    image = image_of(
        part("t", 0, (1, 2, 3), (1, 2), 1),
        part("t", 1, (2, 3, 4), (3,), 3),
        part("t", 2, (4, 5), (), -1),
        part("t", 3, (6, 7), (7,), 6),  # a leader outside its ISR (an unclean election)
    )
    asked = {1, 2, 4, 5, 6, 9}
    by_scan = image.leaders_or_isr_members(asked)
    image.check_indexes()  # builds the indexes
    assert by_scan == image.leaders_or_isr_members(asked) == {1, 2, 6}
    assert image.leaders_or_isr_members(set()) == set()
