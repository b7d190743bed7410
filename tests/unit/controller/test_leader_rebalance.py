"""Auto leader rebalance (Kafka's checkAndTriggerAutoLeaderRebalance)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.controller.leader_rebalance import (
    PartitionKey,
    leader_imbalance,
    partitions_to_rebalance,
)

Assignment = dict[PartitionKey, list[int]]
Leaders = dict[PartitionKey, int | None]


def cluster(
    replicas: Mapping[PartitionKey, Sequence[int]],
    leaders: Mapping[PartitionKey, int | None] | None = None,
) -> tuple[Assignment, Leaders, dict[PartitionKey, list[int]]]:
    """Assignment, leaders (default: the preferred replica) and full ISRs."""
    assignment = {key: list(ar) for key, ar in replicas.items()}
    led: Leaders = {key: ar[0] for key, ar in assignment.items()}
    if leaders is not None:
        led.update(leaders)
    isr = {key: list(ar) for key, ar in assignment.items()}
    return assignment, led, isr


# Ten partitions preferring broker 1 (AR = [1, 2]) and ten preferring broker 2 ([2, 1]).
BASE = {("t", p): ([1, 2] if p < 10 else [2, 1]) for p in range(20)}
LIVE = frozenset({1, 2})


# --------------------------------------------------------------------------------------
# leader_imbalance
# --------------------------------------------------------------------------------------


def test_ratio_balanced() -> None:
    assignment, leaders, _ = cluster(BASE)
    assert leader_imbalance(assignment, leaders) == {1: 0.0, 2: 0.0}


def test_ratio_seed_000_formula() -> None:
    # Broker 2 died and came back: it leads none of the 10 partitions it prefers, and 3
    # of broker 1's partitions moved to broker 2 during a blip.
    moved = {("t", p): 1 for p in range(10, 20)} | {("t", p): 2 for p in range(3)}
    assignment, leaders, _ = cluster(BASE, moved)
    assert leader_imbalance(assignment, leaders) == {1: 3 / 10, 2: 10 / 10}


def test_ratio_uses_only_first_replica() -> None:
    assignment, leaders, _ = cluster({("a", 0): [3, 1, 2], ("a", 1): [1, 3]}, {("a", 0): 1})
    # Broker 3 prefers a-0 but 1 leads it; broker 1 prefers a-1 and leads it.
    assert leader_imbalance(assignment, leaders) == {1: 0.0, 3: 1.0}


def test_ratio_excludes_topics_queued_for_deletion() -> None:
    replicas = {("keep", 0): [1, 2], ("keep", 1): [1, 2], ("gone", 0): [1, 2], ("gone", 1): [3]}
    assignment, leaders, _ = cluster(replicas, {("keep", 0): 2, ("gone", 0): 2})
    assert leader_imbalance(assignment, leaders) == {1: 2 / 3, 3: 0.0}
    assert leader_imbalance(assignment, leaders, excluded_topics={"gone"}) == {1: 1 / 2}


def test_ratio_partition_without_leadership_info_counts_only_in_total() -> None:
    assignment, leaders, _ = cluster({("t", 0): [1], ("t", 1): [1]})
    del leaders[("t", 1)]
    assert leader_imbalance(assignment, leaders) == {1: 0.0}


def test_ratio_partition_without_leader_counts_as_not_led() -> None:
    assignment, leaders, _ = cluster({("t", 0): [1], ("t", 1): [1]}, {("t", 1): None})
    assert leader_imbalance(assignment, leaders) == {1: 0.5}


def test_ratio_ignores_empty_assignments() -> None:
    assert leader_imbalance({("t", 0): []}, {("t", 0): None}) == {}
    assert leader_imbalance({}, {}) == {}


def test_ratio_keys_in_broker_order() -> None:
    assignment, leaders, _ = cluster({("z", 0): [9], ("a", 0): [4], ("m", 0): [7]})
    assert list(leader_imbalance(assignment, leaders)) == [4, 7, 9]


# --------------------------------------------------------------------------------------
# partitions_to_rebalance
# --------------------------------------------------------------------------------------


def test_nothing_to_do_when_balanced() -> None:
    assignment, leaders, isr = cluster(BASE)
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == []


def test_above_threshold_triggers_preferred_elections() -> None:
    moved = {("t", p): 1 for p in (11, 15, 19)}
    assignment, leaders, isr = cluster(BASE, moved)
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [
        ("t", 11),
        ("t", 15),
        ("t", 19),
    ]


def test_threshold_is_strict() -> None:
    # Exactly 10% (1 of 10) is not above the default 10% threshold.
    assignment, leaders, isr = cluster(BASE, {("t", 12): 1})
    assert leader_imbalance(assignment, leaders)[2] == pytest.approx(0.1)
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == []
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, threshold_percent=9.99) == [
        ("t", 12)
    ]


def test_threshold_applies_per_broker() -> None:
    # Broker 1: 1 of 10 (10%, not above). Broker 2: 2 of 10 (20%).
    moved = {("t", 0): 2, ("t", 10): 1, ("t", 11): 1}
    assignment, leaders, isr = cluster(BASE, moved)
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [("t", 10), ("t", 11)]
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, threshold_percent=5) == [
        ("t", 10),
        ("t", 11),
        ("t", 0),
    ]
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, threshold_percent=20) == []


def test_zero_threshold_rebalances_any_imbalance() -> None:
    assignment, leaders, isr = cluster(BASE, {("t", 3): 2})
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, threshold_percent=0) == [
        ("t", 3)
    ]


def test_preferred_replica_must_be_live() -> None:
    moved = {("t", p): 1 for p in range(10, 20)}
    assignment, leaders, isr = cluster(BASE, moved)
    assert partitions_to_rebalance(assignment, leaders, isr, {1}) == []


def test_preferred_replica_must_be_in_isr() -> None:
    moved = {("t", p): 1 for p in range(10, 20)}
    assignment, leaders, isr = cluster(BASE, moved)
    for p in range(10, 15):
        isr[("t", p)] = [1]
    del isr[("t", 15)]  # no ISR known: treated as empty
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [
        ("t", p) for p in range(16, 20)
    ]


def test_in_flight_partitions_are_skipped_but_still_counted() -> None:
    # 2 of 10 not led by broker 2 (20%); one has an election in flight.
    moved = {("t", 10): 1, ("t", 11): 1}
    assignment, leaders, isr = cluster(BASE, moved)
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, in_flight={("t", 10)}) == [
        ("t", 11)
    ]


def test_topics_queued_for_deletion_are_neither_counted_nor_returned() -> None:
    replicas = {("t", p): [1, 2] for p in range(10)} | {("gone", p): [1, 2] for p in range(5)}
    moved = {("gone", p): 2 for p in range(5)} | {("t", 0): 2}
    assignment, leaders, isr = cluster(replicas, moved)
    # Counting "gone": 6 of 15 -> rebalance both topics' partitions.
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [
        ("gone", p) for p in range(5)
    ] + [("t", 0)]
    # Without it: 1 of 10, which is not above 10%.
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE, excluded_topics={"gone"}) == []
    # With a lower threshold only "t" comes back.
    assert partitions_to_rebalance(
        assignment, leaders, isr, LIVE, threshold_percent=5, excluded_topics=["gone"]
    ) == [("t", 0)]


def test_partition_without_leadership_info_is_not_a_candidate() -> None:
    assignment, leaders, isr = cluster({("t", 0): [1, 2], ("t", 1): [1, 2]}, {("t", 0): 2})
    del leaders[("t", 1)]
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [("t", 0)]


def test_leaderless_partition_with_eligible_preferred_replica_is_a_candidate() -> None:
    assignment, leaders, isr = cluster({("t", 0): [1, 2]}, {("t", 0): None})
    assert partitions_to_rebalance(assignment, leaders, isr, LIVE) == [("t", 0)]


def test_order_most_imbalanced_broker_first_then_partition_key() -> None:
    replicas = (
        {("b", p): [1, 2, 3] for p in range(4)}
        | {("a", p): [2, 3, 1] for p in range(4)}
        | {("c", p): [3, 1, 2] for p in range(4)}
    )
    # Broker 1: 2/4 misplaced; broker 2: 4/4; broker 3: 2/4 (tie with 1, 1 goes first).
    moved = (
        {("b", 3): 2, ("b", 1): 3} | {("a", p): 3 for p in range(4)} | {("c", 2): 1, ("c", 0): 1}
    )
    assignment, leaders, isr = cluster(replicas, moved)
    live = {1, 2, 3}
    expected = [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("b", 1),
        ("b", 3),
        ("c", 0),
        ("c", 2),
    ]
    assert partitions_to_rebalance(assignment, leaders, isr, live) == expected
    # Insertion order of the inputs does not matter.
    shuffled = dict(reversed(list(assignment.items())))
    assert partitions_to_rebalance(shuffled, leaders, isr, live) == expected


@pytest.mark.parametrize("cap", [0, 1, 3, 5, 8, 100])
def test_cap(cap: int) -> None:
    replicas = {("a", p): [2, 1] for p in range(4)} | {("b", p): [1, 2] for p in range(4)}
    moved = {("a", p): 1 for p in range(4)} | {("b", p): 2 for p in range(2)}
    assignment, leaders, isr = cluster(replicas, moved)
    uncapped = partitions_to_rebalance(assignment, leaders, isr, LIVE)
    assert uncapped == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1)]
    capped = partitions_to_rebalance(assignment, leaders, isr, LIVE, max_partitions=cap)
    assert capped == uncapped[:cap]


def test_cap_counts_only_eligible_partitions() -> None:
    moved = {("t", p): 1 for p in range(10, 14)}
    assignment, leaders, isr = cluster(BASE, moved)
    isr[("t", 10)] = [1]
    assert partitions_to_rebalance(
        assignment, leaders, isr, LIVE, in_flight=[("t", 11)], max_partitions=1
    ) == [("t", 12)]


def test_negative_cap_rejected() -> None:
    assignment, leaders, isr = cluster(BASE)
    with pytest.raises(ValueError, match="max_partitions"):
        partitions_to_rebalance(assignment, leaders, isr, LIVE, max_partitions=-1)


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[Assignment, Leaders, dict[PartitionKey, list[int]], frozenset[int]]:
    broker_ids = st.integers(0, 5)
    keys = draw(
        st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 6)), unique=True, max_size=25)
    )
    assignment: Assignment = {}
    leaders: Leaders = {}
    isr: dict[PartitionKey, list[int]] = {}
    for key in keys:
        ar = draw(st.lists(broker_ids, min_size=1, max_size=3, unique=True))
        assignment[key] = ar
        if draw(st.booleans()):
            leaders[key] = draw(st.one_of(st.none(), st.sampled_from(ar), broker_ids))
        if draw(st.integers(0, 4)):
            isr[key] = draw(st.lists(st.sampled_from(ar), unique=True))
    live = draw(st.frozensets(broker_ids))
    return assignment, leaders, isr, live


@given(
    clusters(),
    st.floats(0, 100),
    st.frozensets(st.sampled_from("abc")),
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 6)), max_size=5),
    st.one_of(st.none(), st.integers(0, 30)),
)
def test_property_partitions_to_rebalance(
    state: tuple[Assignment, Leaders, dict[PartitionKey, list[int]], frozenset[int]],
    threshold: float,
    excluded: frozenset[str],
    in_flight: list[PartitionKey],
    cap: int | None,
) -> None:
    assignment, leaders, isr, live = state
    ratios = leader_imbalance(assignment, leaders, excluded_topics=excluded)
    for broker, ratio in ratios.items():
        assert 0.0 <= ratio <= 1.0
        assert any(ar[0] == broker for key, ar in assignment.items() if key[0] not in excluded)

    result = partitions_to_rebalance(
        assignment,
        leaders,
        isr,
        live,
        threshold_percent=threshold,
        excluded_topics=excluded,
        in_flight=in_flight,
        max_partitions=cap,
    )
    assert len(result) == len(set(result))
    if cap is not None:
        assert len(result) <= cap
    for key in result:
        preferred = assignment[key][0]
        assert key[0] not in excluded
        assert key not in in_flight
        assert key in leaders
        assert leaders[key] != preferred
        assert preferred in live
        assert preferred in isr.get(key, ())
        assert ratios[preferred] > threshold / 100

    uncapped = partitions_to_rebalance(
        assignment,
        leaders,
        isr,
        live,
        threshold_percent=threshold,
        excluded_topics=excluded,
        in_flight=in_flight,
    )
    assert result == uncapped[: len(result)]
    if cap is None or len(uncapped) <= cap:
        assert result == uncapped
        expected = {
            key
            for key, ar in assignment.items()
            if key[0] not in excluded
            and key not in in_flight
            and key in leaders
            and leaders[key] != ar[0]
            and ar[0] in live
            and ar[0] in isr.get(key, ())
            and ratios[ar[0]] > threshold / 100
        }
        assert set(uncapped) == expected


def _brute_ratio(
    assignment: Mapping[PartitionKey, Sequence[int]],
    leaders: Mapping[PartitionKey, int | None],
    broker: int,
    excluded: Collection[str],
) -> float:
    mine = [k for k, ar in assignment.items() if ar and ar[0] == broker and k[0] not in excluded]
    off = [k for k in mine if k in leaders and leaders[k] != broker]
    return len(off) / len(mine)


@given(clusters(), st.frozensets(st.sampled_from("abc")))
def test_property_leader_imbalance_matches_definition(
    state: tuple[Assignment, Leaders, dict[PartitionKey, list[int]], frozenset[int]],
    excluded: frozenset[str],
) -> None:
    assignment, leaders, _, _ = state
    ratios = leader_imbalance(assignment, leaders, excluded_topics=excluded)
    preferred = {ar[0] for k, ar in assignment.items() if k[0] not in excluded}
    assert set(ratios) == preferred
    for broker, ratio in ratios.items():
        assert ratio == _brute_ratio(assignment, leaders, broker, excluded)
