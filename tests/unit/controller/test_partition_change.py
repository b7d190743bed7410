"""The partition change builder (Kafka's PartitionChangeBuilder): epoch rules, elections,
no-op changes, and the fencing fast path held equal to the builder."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import decode_value, encode_value
from kafkacoord.codecs.models import (
    Cause,
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
from kafkacoord.codecs.records import RecordType
from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.partition_change import (
    NO_LEADER,
    Election,
    PartitionChangeBuilder,
    fence_node,
    new_partition,
    partition_change,
)
from kafkacoord.coordinator.controller.records import EPOCH_FROM_BATCH
from kafkacoord.coordinator.runtime.shard import Record

NOW = 5_000
ONLINE, OFFLINE = PartitionState.ONLINE, PartitionState.OFFLINE


def value(
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    leader: int = 1,
    *,
    leader_epoch: int = 4,
    partition_epoch: int = 7,
    elr: tuple[int, ...] = (),
    last_known: tuple[int, ...] = (),
    reassignment: Reassignment | None = None,
) -> PartitionValue:
    return PartitionValue(
        "t", 0, ONLINE if leader >= 0 else OFFLINE, replicas,
        replicas if isr is None else isr, leader, leader_epoch, partition_epoch, 100, 3,
        reassignment, "initial", elr, last_known,
    )  # fmt: skip


TRIGGER = Trigger(TriggerKind.SESSION_EXPIRED, node_id=1, heartbeat_ms=NOW - 9000)
DECISION = DecisionKey(4, 0)  # a batch of epoch 4's first


def builder(
    current: PartitionValue, min_isr: int | None = None, decision: DecisionKey | None = None
) -> PartitionChangeBuilder:
    return PartitionChangeBuilder(current, now_ms=NOW, min_isr=min_isr, decision=decision)


def test_a_leader_change_bumps_the_leader_and_the_partition_epoch() -> None:
    new = builder(value()).set_leader(2, Election.PREFERRED).build()
    assert new is not None
    assert (new.leader, new.leader_epoch, new.partition_epoch) == (2, 5, 8)
    assert (new.election, new.state, new.updated_ms) == ("preferred", ONLINE, NOW)


def test_an_isr_change_bumps_the_partition_epoch_only() -> None:
    new = builder(value()).set_isr((1, 2)).build()
    assert new is not None
    assert (new.isr, new.leader, new.leader_epoch, new.partition_epoch) == ((1, 2), 1, 4, 8)
    assert new.election == "initial"  # the leader stayed: so did how it was chosen


def test_a_replica_change_bumps_the_partition_epoch_only() -> None:
    new = builder(value()).set_replicas((1, 2, 3, 4)).build()
    assert new is not None
    assert (new.replicas, new.leader_epoch, new.partition_epoch) == ((1, 2, 3, 4), 4, 8)


def test_a_change_that_changes_nothing_builds_nothing() -> None:
    current = value(elr=(), last_known=())
    assert builder(current).build() is None
    assert builder(current).set_isr((1, 2, 3)).set_leader(1, Election.OFFLINE).build() is None
    assert builder(current).set_replicas((1, 2, 3)).set_state(ONLINE).build() is None
    assert builder(current, min_isr=2).build() is None  # ELR on: recomputed, the same
    assert builder(current).clear_elr().build() is None  # nothing to clear
    assert builder(current).remove_unclean_replica(2).build() is None  # not eligible anyway
    # An election that keeps the leader changes nothing either.
    keep = builder(current)
    assert keep.elect_preferred({1, 2, 3})
    assert keep.build() is None


def test_the_value_is_the_whole_record_carrying_what_did_not_change() -> None:
    # The partition record has no delta form (compaction keeps a key's last record only,
    # and there is no partition change record type): a change is the whole new value,
    # with the unchanged fields carried over as they are.
    assert [t.name for t in RecordType if t.name.startswith("PARTITION")] == ["PARTITION"]
    moving = Reassignment((1, 2, 3), (2, 3, 4), (4,), (1,), "A2", 50)
    current = value((2, 3, 4, 1), (1, 2, 3), reassignment=moving)
    new = builder(current).set_isr((1, 2, 3, 4)).build()
    assert new is not None
    assert new.replicas is current.replicas and new.reassignment is current.reassignment
    assert new == dataclasses.replace(
        current, isr=(1, 2, 3, 4), partition_epoch=8, updated_ms=NOW,
        controller_epoch=EPOCH_FROM_BATCH,
    )  # fmt: skip
    assert decode_value(RecordType.PARTITION, encode_value(new)) == new


def test_a_reassignment_start_bumps_the_leader_epoch_without_a_new_leader() -> None:
    current = value()
    moving = Reassignment((1, 2, 3), (4, 5, 6), (4, 5, 6), (1, 2, 3), "A2", NOW)
    new = (
        builder(current)
        .set_replicas((4, 5, 6, 1, 2, 3))
        .set_reassignment(moving)
        .bump_leader_epoch()
        .build()
    )
    assert new is not None
    assert (new.leader, new.leader_epoch, new.partition_epoch) == (1, 5, 8)
    assert new.election == "initial"


def test_reassignment_bookkeeping_alone_is_written_without_an_epoch() -> None:
    queued = Reassignment((1, 2, 3), (4, 5, 6), (4, 5, 6), (1, 2, 3), "QUEUED", NOW)
    new = builder(value()).set_reassignment(queued).build()
    assert new is not None and new.reassignment == queued
    assert (new.leader_epoch, new.partition_epoch) == (4, 7)


def test_fencing_the_leader_elects_the_next_live_isr_member() -> None:
    new = builder(value()).fence_replica(1, {2, 3}, unclean=False).build()
    assert new is not None
    assert (new.leader, new.isr, new.election, new.state) == (2, (2, 3), "offline", ONLINE)
    assert (new.leader_epoch, new.partition_epoch) == (5, 8)


def test_fencing_a_follower_only_shrinks_the_isr() -> None:
    new = builder(value()).fence_replica(3, {1, 2}, unclean=False).build()
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (1, (1, 2), 4, 8)


def test_fencing_the_last_isr_member_without_elr_keeps_it_in_the_isr() -> None:
    current = value((1, 2), (1,))
    new = builder(current).fence_replica(1, {2}, unclean=False).build()
    assert new is not None
    # Leaderless and OFFLINE, and node 1 stays in the ISR to come back as a clean leader.
    assert (new.leader, new.isr, new.state, new.election) == (NO_LEADER, (1,), OFFLINE, "offline")
    assert (new.leader_epoch, new.partition_epoch) == (5, 8)


def test_fencing_below_min_isr_makes_the_leavers_eligible() -> None:
    # min.insync.replicas 2: node 1 leaves an ISR of two, node 2 takes over alone.
    new = builder(value((1, 2, 3), (1, 2)), min_isr=2).fence_replica(1, {2, 3}, unclean=False)
    built = new.build()
    assert built is not None
    assert (built.leader, built.isr, built.elr, built.last_known_elr) == (2, (2,), (1,), ())
    # The last member leaves too: the ISR may be empty now, and the ELR holds both.
    last = builder(built, min_isr=2).fence_replica(2, {3}, unclean=False).build()
    assert last is not None
    assert (last.leader, last.isr, last.elr, last.state) == (NO_LEADER, (), (1, 2), OFFLINE)


def test_elections_draw_on_the_elr_then_the_last_known_leader_then_unclean() -> None:
    eligible = value((1, 2, 3), (), NO_LEADER, elr=(2, 1))
    change = builder(eligible, min_isr=2)
    assert change.elect_offline({1, 2, 3}, unclean=False)
    new = change.build()
    assert new is not None
    assert (new.leader, new.isr, new.elr, new.election) == (1, (1,), (2,), "elr")
    remembered = value((1, 2), (), NO_LEADER, last_known=(2,))
    change = builder(remembered, min_isr=2)
    assert change.elect_offline({2}, unclean=False)
    new = change.build()
    assert new is not None
    assert (new.leader, new.isr, new.last_known_elr, new.election) == (
        2, (2,), (), "last_known_leader",
    )  # fmt: skip
    nobody = value((1, 2), (), NO_LEADER)
    assert not builder(nobody, min_isr=2).elect_offline({2}, unclean=False)
    change = builder(nobody, min_isr=2)
    assert change.elect_offline({2}, unclean=True)
    new = change.build()
    assert new is not None and (new.leader, new.isr, new.election) == (2, (2,), "unclean")


def test_a_new_partition_and_its_first_election() -> None:
    created = new_partition("t", 0, (1, 2, 3), {2, 3}, NOW)
    assert (created.state, created.leader, created.isr, created.election) == (
        ONLINE, 2, (2, 3), "initial",
    )  # fmt: skip
    assert (created.leader_epoch, created.partition_epoch) == (0, 0)
    waiting = new_partition("t", 1, (1, 2), set(), NOW)
    assert (waiting.state, waiting.leader, waiting.isr) == (PartitionState.NEW, NO_LEADER, ())
    change = builder(waiting)
    assert change.elect_offline({1}, unclean=False)
    new = change.build()
    assert new is not None
    assert (new.state, new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (
        ONLINE, 1, (1,), 1, 1,
    )  # fmt: skip


def test_controlled_shutdown_and_reassigned_elections() -> None:
    change = builder(value())
    assert change.elect_controlled_shutdown({1, 2, 3}, 1)
    new = change.build()
    assert new is not None
    assert (new.leader, new.isr, new.election) == (2, (2, 3), "controlled_shutdown")
    change = builder(value((4, 1, 2, 3), (1, 2, 3, 4)))
    assert change.elect_reassigned((4, 2), {1, 2, 3, 4})
    assert (change.leader, change.build().election) == (4, "reassigned")  # type: ignore[union-attr]
    assert not builder(value()).elect_reassigned((5, 6), {1, 2, 3})


def test_an_unclean_restart_leaves_the_elr_and_a_min_isr_change_clears_it() -> None:
    current = value((1, 2, 3), (1,), 1, elr=(2, 3))
    new = builder(current, min_isr=2).remove_unclean_replica(3).build()
    assert new is not None
    assert (new.elr, new.leader_epoch, new.partition_epoch) == ((2,), 4, 8)
    # The last eligible replica is still the last known one.
    alone = value((1, 2), (), NO_LEADER, elr=(2,))
    new = builder(alone, min_isr=2).remove_unclean_replica(2).build()
    assert new is not None and (new.elr, new.last_known_elr) == ((), (2,))
    cleared = builder(current, min_isr=2).clear_elr().build()
    assert cleared is not None and (cleared.elr, cleared.last_known_elr) == ((), ())


def test_put_records_into_the_batch_it_was_made_for() -> None:
    image = MetadataImage()
    image.replay(Record(ControllerKey(), ControllerValue(3, 9, "c", 0)))
    image.replay(Record(TopicKey("t"), TopicValue("t", "id", 1, 3, 0, 3)))
    current = value()
    image.replay(Record(PartitionKey("t", 0), current))
    batch = Batch(image, 4, NOW)
    with pytest.raises(ValueError, match="needs a cause"):
        partition_change(batch, current)
    with pytest.raises(ValueError, match="has no cause"):
        batch.put_partition(dataclasses.replace(current, isr=(1,)))
    with pytest.raises(ValueError, match="has no cause"):
        batch.put_existing_partitions([dataclasses.replace(current, isr=(1,))])
    with batch.because(TRIGGER):
        assert partition_change(batch, current).put() is current  # nothing changed: no record
        assert batch.records == []  # nor a decision record
        new = partition_change(batch, current).set_isr((1, 2)).put()
    assert batch.decision is None and batch.trigger is None  # the outer (none) is back
    # The decision is written once, before the first record it explains.
    decision = DecisionKey(4, 0)  # the batch's first
    assert batch.records == [Record(decision, DecisionValue(TRIGGER, NOW, 4)),
                             Record(PartitionKey("t", 0), new)]  # fmt: skip
    assert new.controller_epoch == 4  # stamped by the batch
    assert new.cause == Cause(decision, "")
    with pytest.raises(ValueError, match="no batch"):
        builder(current).put()


# -- the fencing fast path is the builder's fence_replica ------------------------------------

NODES = (1, 2, 3, 4, 5)


@st.composite
def partitions(draw: st.DrawFn, p: int, min_isr: int | None) -> PartitionValue:
    """A partition in a state the controller leaves: leader in the ISR, ELR consistent."""
    replicas = tuple(draw(st.permutations(NODES))[: draw(st.integers(1, 4))])
    isr = tuple(r for r in replicas if draw(st.booleans()))
    leader = draw(st.sampled_from(isr)) if isr and draw(st.booleans()) else NO_LEADER
    elr: tuple[int, ...] = ()
    last: tuple[int, ...] = ()
    if min_isr is not None and len(isr) < min_isr:
        elr = tuple(r for r in replicas if r not in isr and draw(st.booleans()))
        if not isr and not elr:
            last = tuple(r for r in replicas if draw(st.booleans()))[:1]
    epochs = draw(st.integers(0, 5))
    return PartitionValue(
        "t", p, ONLINE if leader >= 0 else OFFLINE, replicas, isr, leader, epochs,
        epochs + draw(st.integers(0, 5)), 0, 3, None, "initial", elr, last,
    )  # fmt: skip


@st.composite
def fencings(draw: st.DrawFn) -> tuple[list[PartitionValue], int, frozenset[int], int | None, bool]:
    min_isr = draw(st.none() | st.integers(1, 3))
    values = [draw(partitions(p, min_isr)) for p in range(draw(st.integers(1, 12)))]
    fenced = draw(st.sampled_from(NODES))
    live = frozenset(n for n in NODES if n != fenced and draw(st.booleans()))
    return values, fenced, live, min_isr, draw(st.booleans())


@given(fencings())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_fencing_fast_path_builds_what_the_builder_builds(
    case: tuple[list[PartitionValue], int, frozenset[int], int | None, bool],
) -> None:
    values, fenced, live, min_isr, unclean = case
    image = MetadataImage()
    image.replay(Record(ControllerKey(), ControllerValue(3, 9, "c", 0)))
    for n in NODES:
        image.replay(Record(NodeKey(n), NodeValue(n, f"i{n}", 1, n not in live, 0, 3)))
    configs = {} if min_isr is None else {"min.insync.replicas": str(min_isr)}
    image.replay(Record(TopicKey("t"), TopicValue("t", "id", len(values), 3, 0, 3, configs)))
    for v in values:
        image.replay(Record(PartitionKey("t", v.partition), v))
    batch = Batch(image, 4, NOW, elr_min_isr=None if min_isr is None else 1)
    assert batch.live() == live
    with batch.because(TRIGGER):
        fence_node(batch, fenced, lambda topic: (False, unclean))
    fast = {k[1]: v for k, v in batch.pending_partitions()}
    for v in values:
        built = builder(v, min_isr, DECISION).fence_replica(fenced, live, unclean=unclean).build()
        if built is None:
            assert v.partition not in fast, v
        else:
            assert fast.get(v.partition) == dataclasses.replace(built, controller_epoch=4), v
