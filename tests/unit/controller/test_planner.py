"""The goal-based rebalance planner: hard goals, balance, movement and determinism."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.controller.planner import (
    PlanError,
    count_moves,
    movement_lower_bound,
    plan_rebalance,
    summarize,
)
from kafkacoord.coordinator.controller.planner_goals import (
    cluster_layout,
    even_range,
    replica_targets,
)

Key = tuple[str, int]
Assignment = dict[Key, list[int]]
Racks = dict[int, str | None]


# --------------------------------------------------------------------------------------
# checks


def eligible_nodes(racks: Mapping[int, str | None], remove: Collection[int]) -> list[int]:
    return sorted(n for n in racks if n not in set(remove))


def check_hard(
    before: Mapping[Key, Sequence[int]],
    after: Mapping[Key, Sequence[int]],
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    max_replicas: Mapping[int, int] | None = None,
) -> None:
    """Partitions and RF kept, distinct eligible nodes, rack spread, capacity."""
    eligible = eligible_nodes(racks, remove)
    rack_count = len({racks[n] for n in eligible})
    assert set(after) == set(before)
    for key, replicas in after.items():
        assert len(replicas) == len(before[key]), key
        assert len(set(replicas)) == len(replicas), (key, replicas)
        assert set(replicas) <= set(eligible), (key, replicas)
        spanned = {racks[n] for n in replicas}
        assert len(spanned) >= min(len(replicas), rack_count), (key, replicas)
    if max_replicas is not None:
        counts = replica_counts(after)
        for node, cap in max_replicas.items():
            assert counts.get(node, 0) <= cap, node


def replica_counts(assignment: Mapping[Key, Sequence[int]]) -> Counter[int]:
    return Counter(n for replicas in assignment.values() for n in replicas)


def leader_counts(assignment: Mapping[Key, Sequence[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment.values() if replicas)


def spread_of(counts: Mapping[int, int], nodes: Sequence[int]) -> int:
    values = [counts.get(n, 0) for n in nodes]
    return max(values) - min(values)


def in_targets(
    after: Mapping[Key, Sequence[int]],
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    max_replicas: Mapping[int, int] | None = None,
) -> bool:
    layout = cluster_layout(racks, remove, max_replicas)
    targets = replica_targets(layout, (len(r) for r in after.values()))
    counts = replica_counts(after)
    return all(lo <= counts.get(n, 0) <= hi for n, (lo, hi) in targets.items())


def leaders_balanced(after: Mapping[Key, Sequence[int]], nodes: Sequence[int]) -> bool:
    """Preferred leaders within one of even, no node leading more than it holds."""
    counts = replica_counts(after)
    led = leader_counts(after)
    total = sum(1 for r in after.values() if r)
    ranges = even_range(total, [counts.get(n, 0) for n in nodes])
    return all(lo <= led.get(n, 0) <= hi for n, (lo, hi) in zip(nodes, ranges, strict=True))


def broken_partitions(
    before: Mapping[Key, Sequence[int]], racks: Mapping[int, str | None], remove: Collection[int]
) -> int:
    """Partitions the plan must repair: a replica on an ineligible node, a node listed
    twice, or too few racks."""
    eligible = set(eligible_nodes(racks, remove))
    rack_count = len({racks[n] for n in eligible})
    return sum(
        1
        for replicas in before.values()
        if len(set(replicas) & eligible) < len(replicas)
        or len({racks[n] for n in replicas if n in eligible}) < min(len(replicas), rack_count)
    )


# --------------------------------------------------------------------------------------
# scenario builders


def rack_layout(racks: int, per_rack: int, first: int = 0) -> Racks:
    return {first + i: f"r{i % racks}" for i in range(racks * per_rack)}


def rack_aware_random(
    racks: Mapping[int, str | None], partitions: int, rf: int, seed: int, topics: int = 7
) -> Assignment:
    """Seeded random placement that meets rack spread (one replica per chosen rack)."""
    rng = random.Random(seed)
    by_rack: dict[str | None, list[int]] = {}
    for node in sorted(racks):
        by_rack.setdefault(racks[node], []).append(node)
    labels = sorted(by_rack, key=lambda r: (r is None, r or ""))
    assignment: Assignment = {}
    for p in range(partitions):
        chosen = rng.sample(labels, rf)
        assignment[(f"topic-{p % topics}", p // topics)] = [rng.choice(by_rack[r]) for r in chosen]
    return assignment


# --------------------------------------------------------------------------------------
# fixed scenarios


def test_balanced_input_is_returned_unchanged() -> None:
    racks = rack_layout(3, 2)
    # Round-robin over the rack-alternated list: balanced replicas and leaders.
    order = [0, 1, 2, 3, 4, 5]
    before = {("t", p): [order[(p + j) % 6] for j in range(3)] for p in range(12)}
    after = plan_rebalance(before, racks)
    assert after == before
    assert count_moves(before, after) == 0


def test_leaders_balanced_by_reordering_alone() -> None:
    racks: Racks = {1: "a", 2: "b", 3: "c"}
    before = {("t", p): [1, 2, 3] for p in range(30)}
    after = plan_rebalance(before, racks)
    assert count_moves(before, after) == 0
    assert all(set(r) == {1, 2, 3} for r in after.values())
    assert leader_counts(after) == {1: 10, 2: 10, 3: 10}


def test_leaders_moved_with_data_only_when_reordering_cannot() -> None:
    # Node 0 leads both single-replica partitions; no reordering can change that.
    racks: Racks = dict.fromkeys([0, 1, 2])
    before = {("a", 0): [0], ("a", 1): [0], ("b", 0): [1, 2]}
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert leader_counts(after) == {0: 1, 1: 1, 2: 1}
    # One move is enough: node 0 holds 2 replicas of 4, at the ceiling, and may drop one.
    assert count_moves(before, after) == 1
    assert spread_of(replica_counts(after), [0, 1, 2]) <= 1


def test_leader_trade_keeps_replica_counts() -> None:
    # Every node holds two replicas of eight, the even level, so node 0 cannot just give
    # a single-replica partition away: it trades it for a follower replica of node 3.
    racks: Racks = dict.fromkeys(range(4))
    before = {("a", 0): [0], ("a", 1): [0], ("b", 0): [1, 2, 3], ("b", 1): [1, 2, 3]}
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert replica_counts(after) == replica_counts(before)
    assert leader_counts(after) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert count_moves(before, after) == 2


def test_a_trade_blocked_by_racks_goes_through_a_node_that_hands_on() -> None:
    # Found by the equal-racks property. Six nodes in three racks of two, replicas even at
    # six each. The plan leaves node 4 leading 4 where 5-6 is even, following x0 and x9,
    # whose other replicas sit on both of rack-0 and rack-1. So no leader can trade a
    # single-replica partition for node 4's place in them. The trade must go to a leader
    # of x0 or x9 (racks allow a rack-0 node there), and a hand-over carries it to node 4.
    racks: Racks = {0: "rack-0", 2: "rack-0", 1: "rack-1", 3: "rack-1", 4: "rack-2", 5: "rack-2"}
    before: Assignment = {("x", p): [0] for p in range(31)}
    before.update({
        ("x", 2): [1], ("x", 30): [1], ("x", 0): [0, 0, 0], ("x", 9): [0, 0, 0], ("x", 3): [0, 0]
    })  # fmt: skip
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert set(replica_counts(after).values()) == {6}
    assert leaders_balanced(after, sorted(racks))
    assert plan_rebalance(after, racks) == after


def test_add_nodes_fills_them_with_the_fewest_moves() -> None:
    racks = rack_layout(3, 8)
    before = rack_aware_random(racks, 600, 3, seed=7)
    grown = racks | rack_layout(3, 2, first=100)
    after = plan_rebalance(before, grown)
    check_hard(before, after, grown)
    nodes = eligible_nodes(grown, ())
    assert spread_of(replica_counts(after), nodes) <= 1
    assert spread_of(leader_counts(after), nodes) <= 1
    new = [n for n in grown if n >= 100]
    assert all(replica_counts(after)[n] >= 1800 // 30 for n in new)
    bound = movement_lower_bound(before, grown)
    assert bound == 6 * (1800 // 30)
    assert bound <= count_moves(before, after) <= 1.1 * bound
    # A fresh placement of the same partitions would move far more.
    reshuffle = rack_aware_random(grown, 600, 3, seed=8)
    assert count_moves(before, reshuffle) > 3 * bound


def test_drain_empties_removed_nodes() -> None:
    racks = rack_layout(4, 6)
    before = rack_aware_random(racks, 500, 3, seed=3)
    remove = [0, 5, 10]
    after = plan_rebalance(before, racks, remove)
    check_hard(before, after, racks, remove)
    counts = replica_counts(after)
    assert all(counts[n] == 0 for n in remove)
    nodes = eligible_nodes(racks, remove)
    assert in_targets(after, racks, remove)
    assert leaders_balanced(after, nodes)
    bound = movement_lower_bound(before, racks, remove)
    assert bound >= sum(replica_counts(before)[n] for n in remove)
    assert bound <= count_moves(before, after) <= 1.1 * bound


def test_dead_nodes_are_drained_like_removed_ones() -> None:
    racks = rack_layout(2, 3)
    before = {("t", p): [p % 6, 6 + p % 2] for p in range(20)}  # nodes 6, 7 are gone
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert spread_of(replica_counts(after), sorted(racks)) <= 1
    assert count_moves(before, after) == movement_lower_bound(before, racks)


def test_rack_spread_is_repaired() -> None:
    racks: Racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    before = {("t", p): [1, 2] if p % 2 else [3, 4, 5] for p in range(10)}
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert count_moves(before, after) <= movement_lower_bound(before, racks) + 5


def test_rack_less_nodes_form_one_rack_in_a_mixed_cluster() -> None:
    racks: Racks = {1: "a", 2: "a", 3: None, 4: None}
    before = {("t", p): [1, 2] for p in range(8)}
    after = plan_rebalance(before, racks)
    for replicas in after.values():
        assert {racks[n] for n in replicas} == {"a", None}
    assert replica_counts(after) == {1: 4, 2: 4, 3: 4, 4: 4}


def test_no_racks_at_all_makes_rack_spread_vacuous() -> None:
    racks: Racks = dict.fromkeys(range(4))
    before = {("t", p): [0, 1] for p in range(8)}
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    assert replica_counts(after) == {0: 4, 1: 4, 2: 4, 3: 4}
    assert count_moves(before, after) == movement_lower_bound(before, racks) == 8


def test_capacity_is_respected() -> None:
    racks = rack_layout(3, 2)
    before = rack_aware_random(racks, 60, 2, seed=1)
    caps = {0: 5, 1: 10}
    after = plan_rebalance(before, racks, max_replicas=caps)
    check_hard(before, after, racks, max_replicas=caps)
    counts = replica_counts(after)
    # The capped nodes are below the even level (120 / 6 = 20): they are full.
    assert counts[0] == 5
    assert counts[1] == 10
    assert spread_of(counts, [2, 3, 4, 5]) <= 1
    assert in_targets(after, racks, max_replicas=caps)


def test_capacity_and_rack_spread_together_pin_rack_totals() -> None:
    # RF 2 on two racks: each rack holds one replica of each of the 60 partitions, so
    # the uncapped nodes of a rack share what its capped node cannot take.
    racks = rack_layout(2, 3)  # rack r0: 0, 2, 4; rack r1: 1, 3, 5
    before = rack_aware_random(racks, 60, 2, seed=1)
    caps = {0: 5, 1: 10}
    after = plan_rebalance(before, racks, max_replicas=caps)
    check_hard(before, after, racks, max_replicas=caps)
    counts = replica_counts(after)
    assert [counts[n] for n in (0, 1)] == [5, 10]
    assert sorted(counts[n] for n in (2, 4)) == [27, 28]
    assert [counts[n] for n in (3, 5)] == [25, 25]


def test_rack_spread_bounds_the_targets() -> None:
    # RF 2 on two racks: rack "b" has one node, which must hold every partition.
    racks: Racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    before = {("t", p): [1 + p % 3, 4] for p in range(9)}
    targets = replica_targets(cluster_layout(racks), [2] * 9)
    assert targets == {1: (3, 3), 2: (3, 3), 3: (3, 3), 4: (9, 9)}
    after = plan_rebalance(before, racks)
    assert count_moves(before, after) == movement_lower_bound(before, racks) == 0
    assert sorted(leader_counts(after).values()) == [2, 2, 2, 3]


@pytest.mark.parametrize(
    ("assignment", "racks", "remove", "caps", "message"),
    [
        ({("t", 0): [1, 2, 3]}, {1: "a", 2: "b"}, (), None, "replication factor 3"),
        ({("t", 0): [1]}, {1: "a"}, [1], None, "no eligible nodes"),
        ({("t", p): [1, 2] for p in range(5)}, {1: "a", 2: "b"}, (), {1: 4}, "rack spread"),
        (
            {("t", p): [p % 3] for p in range(5)},
            dict.fromkeys(range(3)),
            (),
            {0: 1, 1: 1, 2: 1},
            "fit",
        ),
        ({("t", 0): [1]}, {1: "a"}, (), {1: -1}, "negative"),
    ],
)
def test_impossible_inputs_raise_plan_error(
    assignment: Assignment,
    racks: Racks,
    remove: Sequence[int],
    caps: dict[int, int] | None,
    message: str,
) -> None:
    with pytest.raises(PlanError, match=message):
        plan_rebalance(assignment, racks, remove, max_replicas=caps)


def test_lower_bound_counts_excess_deficit_and_rack_fixes() -> None:
    racks: Racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    # Excess: nodes 1, 2 hold 4 each, the even level is 2.
    skewed = {("t", p): [1, 2] for p in range(4)}
    assert movement_lower_bound(skewed, racks) == 4
    # Draining node 2: its 4 replicas, plus node 1's 2 above the level of rack "a".
    assert movement_lower_bound(skewed, racks, [2]) == 4 + 2
    drained = plan_rebalance(skewed, racks, [2])
    assert count_moves(skewed, drained) == 6
    # Rack fixes: both replicas on rack "a", balanced counts: one move each.
    crowded = {("t", 0): [1, 3], ("t", 1): [3, 1], ("t", 2): [2, 4], ("t", 3): [4, 2]}
    assert movement_lower_bound(crowded, racks) == 4
    after = plan_rebalance(crowded, racks)
    check_hard(crowded, after, racks)
    assert count_moves(crowded, after) == 4


def test_summary_reports_counts_and_moves() -> None:
    racks: Racks = {1: "a", 2: "b", 3: "c"}
    before = {("t", p): [1, 2] for p in range(6)}
    after = plan_rebalance(before, racks)
    summary = summarize(before, after, racks)
    assert summary.replicas_before == {1: 6, 2: 6, 3: 0}
    assert summary.replicas_after == {1: 4, 2: 4, 3: 4}
    assert summary.leaders_before == {1: 6, 2: 0, 3: 0}
    assert summary.leaders_after == {1: 2, 2: 2, 3: 2}
    assert summary.moves == count_moves(before, after) == 4
    assert summary.lower_bound == 4
    assert summary.leader_changes == sum(1 for k in after if after[k][0] != before[k][0])


# --------------------------------------------------------------------------------------
# properties


@st.composite
def clusters(draw: st.DrawFn, equal_racks: bool = False) -> tuple[Assignment, Racks, list[int]]:
    """Racks (maybe none), a possibly broken assignment (dead nodes, duplicates, crowded
    racks) and nodes to remove, with enough eligible nodes for every partition."""
    rack_count = draw(st.integers(1, 4))
    rack_less = draw(st.booleans()) and not equal_racks
    if equal_racks:
        sizes = [draw(st.integers(1, 4))] * rack_count
    else:
        sizes = draw(st.lists(st.integers(1, 4), min_size=rack_count, max_size=rack_count))
    ids = draw(st.permutations(range(40)))
    racks: Racks = {}
    for r, size in enumerate(sizes):
        for _ in range(size):
            racks[ids[len(racks)]] = None if rack_less and r == 0 else f"rack-{r}"
    live = sorted(racks)
    remove = [] if equal_racks else draw(st.lists(st.sampled_from(live), unique=True))
    remove = remove[: len(live) - 1]
    eligible = len(live) - len(remove)
    pool = [*live, 40, 41]  # 40, 41: dead nodes
    rf = st.integers(1, min(3, eligible))
    partitions = draw(st.integers(0, 40))
    assignment: Assignment = {}
    for p in range(partitions):
        size = draw(rf)
        replicas = draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
        assignment[(draw(st.sampled_from("xyz")), p)] = replicas
    return assignment, racks, remove


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_hard_goals_and_lower_bound_hold(cluster: tuple[Assignment, Racks, list[int]]) -> None:
    before, racks, remove = cluster
    after = plan_rebalance(before, racks, remove)
    check_hard(before, after, racks, remove)
    assert all(n not in remove for r in after.values() for n in r)
    moves = count_moves(before, after)
    if in_targets(after, racks, remove):
        assert moves >= movement_lower_bound(before, racks, remove)
    assert plan_rebalance(after, racks, remove) == after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(equal_racks=True))
def test_equal_racks_balance_replicas_and_leaders(
    cluster: tuple[Assignment, Racks, list[int]],
) -> None:
    before, racks, _ = cluster
    after = plan_rebalance(before, racks)
    check_hard(before, after, racks)
    nodes = sorted(racks)
    assert spread_of(replica_counts(after), nodes) <= 1
    assert leaders_balanced(after, nodes)
    moves = count_moves(before, after)
    bound = movement_lower_bound(before, racks)
    # Single-replica partitions cannot change leader without moving data.
    single = sum(1 for replicas in before.values() if len(replicas) == 1)
    assert bound <= moves <= bound + broken_partitions(before, racks, ()) + 2 * single


@settings(max_examples=100, deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_same_plan_whatever_the_input_order(
    cluster: tuple[Assignment, Racks, list[int]], rng: random.Random
) -> None:
    before, racks, remove = cluster
    keys = list(before)
    rng.shuffle(keys)
    nodes = list(racks)
    rng.shuffle(nodes)
    shuffled_remove = list(remove)
    rng.shuffle(shuffled_remove)
    again = plan_rebalance(
        {k: before[k] for k in keys}, {n: racks[n] for n in nodes}, shuffled_remove
    )
    assert again == plan_rebalance(before, racks, remove)
