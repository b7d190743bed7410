"""Leader election strategies (Kafka's PartitionLeaderElectionAlgorithms)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.controller.election import (
    ElectionResult,
    controlled_shutdown_election,
    controlled_shutdown_isr,
    controlled_shutdown_leader,
    offline_election,
    offline_leader,
    preferred_election,
    preferred_leader,
    reassigned_election,
    reassigned_leader,
)

# --------------------------------------------------------------------------------------
# Offline
# --------------------------------------------------------------------------------------


def test_offline_first_live_isr_member_in_assignment_order() -> None:
    # ISR order does not matter; assignment order does.
    assert offline_leader([1, 2, 3], [3, 2], {1, 2, 3}, unclean=False) == 2
    assert offline_leader([3, 2, 1], [1, 2, 3], {1, 2, 3}, unclean=False) == 3


def test_offline_skips_dead_isr_members() -> None:
    assert offline_leader([1, 2, 3], [1, 2, 3], {3}, unclean=False) == 3


def test_offline_clean_beats_unclean() -> None:
    # 1 is live but out of the ISR; 2 is live and in it: clean election picks 2.
    assert offline_leader([1, 2, 3], [2], {1, 2}, unclean=True) == 2
    result = offline_election([1, 2, 3], [2], {1, 2}, unclean=True)
    assert result == ElectionResult(leader=2, isr=(2,), unclean=False)


def test_offline_no_live_isr_unclean_disabled() -> None:
    assert offline_leader([1, 2, 3], [1], {2, 3}, unclean=False) is None
    assert offline_election([1, 2, 3], [1], {2, 3}, unclean=False) is None


def test_offline_no_live_isr_unclean_enabled() -> None:
    assert offline_leader([1, 2, 3], [1], {3, 2}, unclean=True) == 2
    result = offline_election([1, 2, 3], [1], {3, 2}, unclean=True)
    assert result == ElectionResult(leader=2, isr=(2,), unclean=True, via="unclean")


def test_offline_nothing_live() -> None:
    assert offline_leader([1, 2, 3], [1, 2, 3], set(), unclean=True) is None
    assert offline_election([1, 2, 3], [1, 2, 3], [], unclean=True) is None


def test_offline_live_broker_outside_assignment_is_ignored() -> None:
    assert offline_leader([1, 2], [1, 2, 9], {9}, unclean=True) is None


def test_offline_empty_assignment() -> None:
    assert offline_leader([], [1], {1}, unclean=True) is None


def test_offline_clean_isr_keeps_live_members_in_isr_order() -> None:
    result = offline_election([1, 2, 3, 4], [4, 1, 3, 2], {2, 3, 4}, unclean=False)
    assert result == ElectionResult(leader=2, isr=(4, 3, 2))


def test_offline_clean_isr_from_a_set_is_sorted() -> None:
    result = offline_election([3, 2, 1], {3, 1, 2}, {1, 2, 3}, unclean=False)
    assert result is not None
    assert result.leader == 3
    assert result.isr == (1, 2, 3)


def test_offline_new_partition_like_kafka_new_partition_state() -> None:
    """A new partition: ISR = live replicas, leader = first of them."""
    assignment = [5, 6, 7]
    live = {6, 7}
    isr = [r for r in assignment if r in live]
    assert offline_election(assignment, isr, live, unclean=False) == ElectionResult(6, (6, 7))


# --------------------------------------------------------------------------------------
# Reassigned
# --------------------------------------------------------------------------------------


def test_reassigned_first_live_isr_member_of_target() -> None:
    # docs/architecture.md#reassignment-trace: RS {1,2,3} -> TRS {4,5,6}, ISR {1..6}:
    # the leader moves to 4.
    isr = [1, 2, 3, 4, 5, 6]
    assert reassigned_leader([4, 5, 6], isr, set(isr)) == 4
    assert reassigned_election([4, 5, 6], isr, set(isr)) == ElectionResult(4, tuple(isr))


def test_reassigned_skips_dead_or_out_of_sync_targets() -> None:
    assert reassigned_leader([4, 5, 6], [1, 5, 6], {1, 4, 6}) == 6


def test_reassigned_fails_without_candidate() -> None:
    # Never falls back to a replica outside the target set, never unclean.
    assert reassigned_leader([4, 5], [1, 2, 3], {1, 2, 3, 4, 5}) is None
    assert reassigned_election([4, 5], [1, 2, 3], {1, 2, 3, 4, 5}) is None


# --------------------------------------------------------------------------------------
# Preferred
# --------------------------------------------------------------------------------------


def test_preferred_is_ar0_when_live_and_in_isr() -> None:
    assert preferred_leader([2, 1, 3], [1, 2, 3], {1, 2, 3}) == 2
    assert preferred_election([2, 1, 3], [1, 2, 3], {1, 2, 3}) == ElectionResult(2, (1, 2, 3))


def test_preferred_already_leader_is_not_an_error() -> None:
    # The caller may pass the current leader; the answer is simply AR[0] again.
    assert preferred_leader([1, 2], [1, 2], {1, 2}) == 1


@pytest.mark.parametrize(
    ("isr", "live"),
    [
        ([1, 2, 3], {1, 3}),  # preferred replica 2 dead
        ([1, 3], {1, 2, 3}),  # preferred replica 2 out of the ISR
        ([1, 3], {1, 3}),
    ],
)
def test_preferred_fails_without_falling_back(isr: list[int], live: set[int]) -> None:
    assert preferred_leader([2, 1, 3], isr, live) is None
    assert preferred_election([2, 1, 3], isr, live) is None


def test_preferred_empty_assignment() -> None:
    assert preferred_leader([], [1], {1}) is None


# --------------------------------------------------------------------------------------
# Controlled shutdown
# --------------------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_off_shutting_down_broker() -> None:
    # Broker 1 is shutting down but still live (it has not gone away yet).
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == 2
    result = controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1})
    assert result == ElectionResult(2, (2, 3))


def test_controlled_shutdown_respects_isr_and_liveness() -> None:
    # 2 is out of the ISR, 3 is dead, 4 is fine.
    assert controlled_shutdown_leader([1, 2, 3, 4], [1, 3, 4], {1, 2, 4}, [1]) == 4


def test_controlled_shutdown_fails_when_only_shutting_down_brokers_remain() -> None:
    assert controlled_shutdown_leader([1, 2], [1], {1, 2}, {1}) is None
    assert controlled_shutdown_election([1, 2], [1], {1, 2}, {1}) is None


def test_controlled_shutdown_several_brokers() -> None:
    result = controlled_shutdown_election([1, 2, 3], [3, 2, 1], {1, 2, 3}, {1, 2})
    assert result == ElectionResult(3, (3,))


def test_controlled_shutdown_isr() -> None:
    assert controlled_shutdown_isr([3, 1, 2], {1}) == [3, 2]
    assert controlled_shutdown_isr({3, 1, 2}, [2]) == [1, 3]
    assert controlled_shutdown_isr([1], [1]) == []
    assert controlled_shutdown_isr([1, 2], []) == [1, 2]


# --------------------------------------------------------------------------------------
# ElectionResult
# --------------------------------------------------------------------------------------


def test_election_result_is_frozen() -> None:
    result = ElectionResult(1, (1, 2))
    assert result.unclean is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.leader = 2  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------

brokers = st.integers(0, 9)
assignments = st.lists(brokers, max_size=6, unique=True)
broker_sets = st.frozensets(brokers, max_size=10)


@given(assignments, st.lists(brokers, max_size=10, unique=True), broker_sets, st.booleans())
def test_property_offline(
    assignment: list[int], isr: list[int], live: frozenset[int], unclean: bool
) -> None:
    leader = offline_leader(assignment, isr, live, unclean=unclean)
    result = offline_election(assignment, isr, live, unclean=unclean)
    assert (result is None) == (leader is None)
    live_isr = [r for r in assignment if r in live and r in isr]
    if leader is None:
        assert not live_isr
        if unclean:
            assert not any(r in live for r in assignment)
        return
    assert result is not None
    assert result.leader == leader
    assert leader in live
    assert leader in assignment
    assert leader in result.isr
    assert set(result.isr) <= live
    if live_isr:
        assert leader == live_isr[0]
        assert not result.unclean
        assert result.isr == tuple(r for r in isr if r in live)
    else:
        assert unclean
        assert result.unclean
        assert leader not in isr
        assert result.isr == (leader,)
        assert leader == next(r for r in assignment if r in live)


@given(assignments, st.lists(brokers, max_size=10, unique=True), broker_sets)
def test_property_unclean_off_never_leaves_isr(
    assignment: list[int], isr: list[int], live: frozenset[int]
) -> None:
    leader = offline_leader(assignment, isr, live, unclean=False)
    assert leader is None or (leader in isr and leader in live and leader in assignment)
    # Turning unclean election on never changes a clean result.
    if leader is not None:
        assert offline_leader(assignment, isr, live, unclean=True) == leader


@given(assignments, st.lists(brokers, max_size=10, unique=True), broker_sets)
def test_property_reassigned(target: list[int], isr: list[int], live: frozenset[int]) -> None:
    result = reassigned_election(target, isr, live)
    leader = reassigned_leader(target, isr, live)
    if result is None:
        assert leader is None
        assert not [r for r in target if r in live and r in isr]
        return
    assert result.leader == leader
    assert leader in target
    assert leader in live
    assert leader in isr
    assert result.isr == tuple(isr)
    assert not result.unclean


@given(assignments, st.lists(brokers, max_size=10, unique=True), broker_sets)
def test_property_preferred(assignment: list[int], isr: list[int], live: frozenset[int]) -> None:
    leader = preferred_leader(assignment, isr, live)
    if assignment and assignment[0] in live and assignment[0] in isr:
        assert leader == assignment[0]
        assert preferred_election(assignment, isr, live) == ElectionResult(leader, tuple(isr))
    else:
        assert leader is None
        assert preferred_election(assignment, isr, live) is None


@given(assignments, st.lists(brokers, max_size=10, unique=True), broker_sets, broker_sets)
def test_property_controlled_shutdown(
    assignment: list[int], isr: list[int], live: frozenset[int], down: frozenset[int]
) -> None:
    result = controlled_shutdown_election(assignment, isr, live, down)
    leader = controlled_shutdown_leader(assignment, isr, live, down)
    new_isr = controlled_shutdown_isr(isr, down)
    assert not set(new_isr) & down
    assert new_isr == [r for r in isr if r not in down]
    if result is None:
        assert leader is None
        return
    assert result.leader == leader
    assert leader in assignment
    assert leader in live
    assert leader in isr
    assert leader not in down
    assert leader in result.isr
    assert result.isr == tuple(new_isr)
    assert leader == next(r for r in assignment if r in live and r in isr and r not in down)
