"""Every state of the reconciliation state machine (Kafka's CurrentAssignmentBuilder),
as a pure function: no shard, no records."""

from __future__ import annotations

import pytest

from kafkacoord.codecs.models import MemberState
from kafkacoord.coordinator.groups.consumer import ConsumerMember, reconcile
from kafkacoord.coordinator.groups.consumer.assignment import Assignment
from kafkacoord.coordinator.groups.consumer.reconciliation import PartitionEpoch
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError


def a(**topics: list[int]) -> Assignment:
    return {t: frozenset(ps) for t, ps in topics.items()}


def owners(**epochs: int) -> PartitionEpoch:
    """Partition owner epochs: ``t0=4`` means t-0 is owned at epoch 4."""
    table = {("t", int(k[1:])): v for k, v in epochs.items()}
    return lambda topic, partition: table.get((topic, partition), -1)


def member(epoch: int, state: MemberState = MemberState.STABLE, **kw: object) -> ConsumerMember:
    return ConsumerMember("m", subscribed_topic_names=("t",), member_epoch=epoch,
                          previous_member_epoch=epoch - 1, state=state, **kw)  # type: ignore[arg-type]  # fmt: skip


def step(
    m: ConsumerMember,
    epoch: int,
    target: Assignment,
    *,
    owned: Assignment | None,
    partition_owners: PartitionEpoch | None = None,
    subscribed: tuple[str, ...] = ("t",),
) -> ConsumerMember:
    return reconcile(m, target_epoch=epoch, target=target,
                     partition_epoch=partition_owners or owners(), owned=owned,
                     subscribed=subscribed)  # fmt: skip


def test_stable_at_the_target_epoch_stays_put() -> None:
    m = member(3, assigned=a(t=[0, 1]))
    assert step(m, 3, a(t=[0, 1]), owned=a(t=[0, 1])) is m


def test_stable_member_takes_free_partitions_at_the_new_epoch() -> None:
    m = member(3, assigned=a(t=[0]))
    got = step(m, 4, a(t=[0, 1]), owned=a(t=[0]))
    assert (got.state, got.member_epoch, got.previous_member_epoch) == (MemberState.STABLE, 4, 3)
    assert got.assigned == a(t=[0, 1])


def test_partitions_to_give_up_keep_the_old_epoch_until_revoked() -> None:
    m = member(3, assigned=a(t=[0, 1, 2]))
    got = step(m, 4, a(t=[0]), owned=a(t=[0, 1, 2]))
    assert (got.state, got.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 3)
    assert got.assigned == a(t=[0]) and got.pending_revocation == a(t=[1, 2])
    # Still reporting one of them: no progress.
    assert step(got, 4, a(t=[0]), owned=a(t=[0, 2])) is got
    # Not reported at all (null): still counts as owned.
    assert step(got, 4, a(t=[0]), owned=None) is got
    done = step(got, 4, a(t=[0]), owned=a(t=[0]))
    assert (done.state, done.member_epoch) == (MemberState.STABLE, 4)
    assert done.pending_revocation == {}


def test_partitions_still_owned_elsewhere_wait_until_released() -> None:
    m = member(3, assigned=a(t=[0]))
    busy = owners(t1=3)
    got = step(m, 4, a(t=[0, 1]), owned=a(t=[0]), partition_owners=busy)
    assert (got.state, got.member_epoch) == (MemberState.UNRELEASED_PARTITIONS, 4)
    assert got.assigned == a(t=[0])
    again = step(got, 4, a(t=[0, 1]), owned=a(t=[0]), partition_owners=busy)
    assert again.state is MemberState.UNRELEASED_PARTITIONS and again.assigned == a(t=[0])
    free = step(again, 4, a(t=[0, 1]), owned=a(t=[0]))
    assert (free.state, free.assigned) == (MemberState.STABLE, a(t=[0, 1]))


def test_unreleased_with_nothing_to_take_yet() -> None:
    m = member(3, assigned=a(t=[0]))
    got = step(m, 4, a(t=[0, 1]), owned=a(t=[0]), partition_owners=owners(t1=2))
    assert got.state is MemberState.UNRELEASED_PARTITIONS and got.member_epoch == 4


def test_a_partition_it_is_revoking_may_come_straight_back() -> None:
    m = member(3, MemberState.UNREVOKED_PARTITIONS, assigned=a(t=[0]),
               pending_revocation=a(t=[1]))  # fmt: skip
    got = step(m, 5, a(t=[0, 1]), owned=a(t=[0]), partition_owners=owners(t1=3))
    assert (got.state, got.assigned) == (MemberState.STABLE, a(t=[0, 1]))


def test_an_unsubscribed_topic_is_revoked_at_once() -> None:
    both = {"t": frozenset({0}), "u": frozenset({1})}
    m = member(3, assigned=both)
    got = step(m, 3, both, owned=both, subscribed=("t",))
    assert (got.state, got.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 3)
    assert got.pending_revocation == {"u": frozenset({1})} and got.assigned == a(t=[0])
    # Already given up by the member: dropped without a revocation step.
    quiet = step(m, 3, both, owned=a(t=[0]), subscribed=("t",))
    assert quiet.state is MemberState.STABLE and quiet.assigned == a(t=[0])


def test_an_unknown_state_fences_a_member_that_still_owns_partitions() -> None:
    m = member(3, MemberState.UNKNOWN, assigned=a(t=[0]))
    with pytest.raises(ProtocolError) as info:
        step(m, 4, a(t=[0]), owned=a(t=[0]))
    assert info.value.code is ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(ProtocolError):
        step(m, 4, a(t=[0]), owned=None)
    fresh = step(m, 4, a(t=[0, 1]), owned={})
    assert (fresh.state, fresh.member_epoch, fresh.assigned) == (MemberState.STABLE, 4,
                                                                a(t=[0, 1]))  # fmt: skip
