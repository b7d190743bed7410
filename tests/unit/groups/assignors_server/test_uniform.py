"""Server-side uniform assignor: examples and properties (balance, stickiness, racks)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors.server import GroupAssignment, uniform_assign

from .support import (
    PROPS,
    RACKS,
    TOPICS,
    Members,
    check_valid,
    claims_st,
    member_ids_st,
    moved,
    no_improving_path,
    partitions_of,
    shuffled,
    sizes,
    subscription_st,
    topics_st,
    with_assigned,
)

# --------------------------------------------------------------------------- examples


def test_fresh_homogeneous_runs_in_member_order() -> None:
    members = {m: {"topics": ["t"]} for m in ("c", "a", "b")}
    assert uniform_assign(members, {"t": 7}) == {
        "a": {"t": [0, 1, 2]},
        "b": {"t": [3, 4]},
        "c": {"t": [5, 6]},
    }


def test_fresh_homogeneous_spans_topics_in_name_order() -> None:
    members = {m: {"topics": ["y", "x"]} for m in ("a", "b")}
    assert uniform_assign(members, {"x": 3, "y": 3}) == {
        "a": {"x": [0, 1, 2]},
        "b": {"y": [0, 1, 2]},
    }


def test_extra_partitions_stay_with_the_members_that_have_them() -> None:
    # 7 partitions on 3 members: one member keeps 3. Member "c" has 3 already, so it is the
    # one, although it comes last in member id order.
    members = {
        "a": {"topics": ["t"], "assigned": {"t": [0, 1]}},
        "b": {"topics": ["t"], "assigned": {"t": [2, 3]}},
        "c": {"topics": ["t"], "assigned": {"t": [4, 5, 6]}},
    }
    got = uniform_assign(members, {"t": 7})
    assert got == {m: spec["assigned"] for m, spec in members.items()}


def test_member_joining_takes_only_its_share() -> None:
    members: Members = {m: {"topics": ["t"]} for m in ("a", "b")}
    before = uniform_assign(members, {"t": 10})
    grown = {**with_assigned(members, before), "c": {"topics": ["t"]}}
    after = uniform_assign(grown, {"t": 10})
    assert sizes(after) == {"a": 4, "b": 3, "c": 3} or sizes(after) == {"a": 3, "b": 4, "c": 3}
    assert moved(before, after) == {("t", p) for p in after["c"]["t"]}


def test_heterogeneous_example() -> None:
    members = {
        "a": {"topics": ["x"]},
        "b": {"topics": ["x", "y"]},
        "c": {"topics": ["y"]},
    }
    got = uniform_assign(members, {"x": 20, "y": 10})
    check_valid(members, {"x": 20, "y": 10}, got)
    assert sizes(got) == {"a": 10, "b": 10, "c": 10}


def test_heterogeneous_chain_is_balanced_beyond_each_topic() -> None:
    # Kafka's own example of a heterogeneous assignment its builder leaves at 9, 10 and 11:
    # each topic's subscribers are within one partition of each other, but moving one
    # partition of y from c to b and one of x from b to a evens all three out.
    members: Members = {
        "a": {"topics": ["x"], "assigned": {"x": list(range(9))}},
        "b": {"topics": ["x", "y"], "assigned": {"x": list(range(9, 14)), "y": list(range(5))}},
        "c": {"topics": ["y"], "assigned": {"y": list(range(5, 16))}},
    }
    topics = {"x": 14, "y": 16}
    got = uniform_assign(members, topics)
    check_valid(members, topics, got)
    assert sizes(got) == {"a": 10, "b": 10, "c": 10}
    assert len(moved({m: s["assigned"] for m, s in members.items()}, got)) == 2


def test_heterogeneous_member_joining_takes_from_the_loaded_subscribers() -> None:
    members: Members = {
        "a": {"topics": ["x", "y"]},
        "b": {"topics": ["x"]},
        "c": {"topics": ["y", "z"]},
    }
    topics = {"x": 6, "y": 6, "z": 3}
    before = uniform_assign(members, topics)
    grown = {**with_assigned(members, before), "d": {"topics": ["z", "x"]}}
    after = uniform_assign(grown, topics)
    check_valid(grown, topics, after)
    assert moved(before, after) == {tp for tp, m in partitions_of(after).items() if m == "d"}
    assert max(sizes(after).values()) - min(sizes(after).values()) <= 1


def test_member_with_no_existing_topic_gets_nothing() -> None:
    members = {"a": {"topics": ["t"]}, "b": {"topics": ["ghost"]}, "c": {}}
    assert uniform_assign(members, {"t": 2}) == {"a": {"t": [0, 1]}, "b": {}, "c": {}}


def test_racks_place_partitions_in_their_replicas_racks() -> None:
    members = {
        "a": {"topics": ["t"], "rack": "r1"},
        "b": {"topics": ["t"], "rack": "r0"},
    }
    racks = {"t": {0: ["r0"], 1: ["r1"], 2: ["r0"], 3: ["r1"]}}
    assert uniform_assign(members, {"t": 4}, racks) == {
        "a": {"t": [1, 3]},
        "b": {"t": [0, 2]},
    }


def test_racks_choose_who_takes_the_extra_partition() -> None:
    # 3 partitions on 2 members: the rack with two matching partitions gets the extra one.
    members = {
        "a": {"topics": ["t"], "rack": "r0"},
        "b": {"topics": ["t"], "rack": "r1"},
    }
    racks = {"t": {0: ["r1"], 1: ["r0"], 2: ["r1"]}}
    assert uniform_assign(members, {"t": 3}, racks) == {"a": {"t": [1]}, "b": {"t": [0, 2]}}


def test_kept_partitions_are_not_moved_for_racks() -> None:
    # Stickiness comes first: b keeps partition 0 although a sits in its replica's rack.
    members = {
        "a": {"topics": ["t"], "rack": "r0", "assigned": {"t": [1]}},
        "b": {"topics": ["t"], "rack": "r1", "assigned": {"t": [0]}},
    }
    racks = {"t": {0: ["r0"], 1: ["r1"]}}
    assert uniform_assign(members, {"t": 2}, racks) == {"a": {"t": [1]}, "b": {"t": [0]}}


def test_member_over_quota_gives_up_non_matching_partitions_first() -> None:
    members: Members = {
        "a": {"topics": ["t"], "rack": "r0", "assigned": {"t": [0, 1, 2, 3]}},
        "b": {"topics": ["t"], "rack": "r1"},
    }
    racks = {"t": {0: ["r1"], 1: ["r0"], 2: ["r1"], 3: ["r0"]}}
    assert uniform_assign(members, {"t": 4}, racks) == {"a": {"t": [1, 3]}, "b": {"t": [0, 2]}}


def test_heterogeneous_racks_prefer_matching_members() -> None:
    members = {
        "a": {"topics": ["x", "y"], "rack": "r0"},
        "b": {"topics": ["x"], "rack": "r1"},
        "c": {"topics": ["y"], "rack": "r1"},
    }
    topics = {"x": 4, "y": 2}
    racks = {"x": {0: ["r1"], 1: ["r1"], 2: ["r0"], 3: ["r0"]}, "y": {0: ["r1"], 1: ["r0"]}}
    got = uniform_assign(members, topics, racks)
    check_valid(members, topics, got)
    assert got == {"a": {"x": [2, 3]}, "b": {"x": [0, 1]}, "c": {"y": [0, 1]}}


# --------------------------------------------------------------------------- properties


def _members(data: st.DataObject, ids: list[str], topics: Mapping[str, int], subs: Any) -> Members:
    """Members with ``subs`` (a list, or None to draw one each), arbitrary claims and racks."""
    out: Members = {}
    for m in ids:
        spec: dict[str, Any] = {"topics": subs if subs is not None else data.draw(subscription_st)}
        if data.draw(st.booleans()):
            spec["assigned"] = data.draw(claims_st(topics))
        if data.draw(st.booleans()):
            spec["rack"] = data.draw(st.sampled_from(RACKS))
        out[m] = spec
    return out


def _racks(data: st.DataObject, topics: Mapping[str, int]) -> dict[str, dict[int, list[str]]]:
    return {
        t: {
            p: data.draw(st.lists(st.sampled_from(RACKS), unique=True, max_size=2))
            for p in range(n)
        }
        for t, n in topics.items()
    }


def _valid_claims(members: Members, topics: Mapping[str, int]) -> dict[tuple[str, int], str]:
    """The documented input cleaning: subscribed, existing, first claimant in id order."""
    owner: dict[tuple[str, int], str] = {}
    for m in sorted(members):
        spec = members[m]
        for t, parts in (spec.get("assigned") or {}).items():
            if t not in (spec.get("topics") or ()):
                continue
            for p in parts:
                if 0 <= p < topics.get(t, 0):
                    owner.setdefault((t, p), m)
    return owner


@PROPS
@given(member_ids_st, topics_st, subscription_st, st.data())
def test_homogeneous_is_balanced_and_keeps_the_most(
    ids: list[str], topics: dict[str, int], subs: list[str], data: st.DataObject
) -> None:
    members = _members(data, ids, topics, subs)
    racks = _racks(data, topics) if data.draw(st.booleans()) else None
    got = uniform_assign(members, topics, racks)
    check_valid(members, topics, got)
    counts = sizes(got).values()
    assert max(counts) - min(counts) <= 1
    # As many current partitions stay as a balanced assignment can keep.
    claims = _valid_claims(members, topics)
    total = sum(topics.get(t, 0) for t in set(subs))
    quota, extra = divmod(total, len(ids))
    have = [sum(1 for m in claims.values() if m == member) for member in ids]
    best = sum(min(h, quota) for h in have) + min(extra, sum(1 for h in have if h > quota))
    kept = sum(1 for tp, m in partitions_of(got).items() if claims.get(tp) == m)
    assert kept == best


@PROPS
@given(member_ids_st, topics_st, st.data())
def test_heterogeneous_balance_cannot_be_improved(
    ids: list[str], topics: dict[str, int], data: st.DataObject
) -> None:
    members = _members(data, ids, topics, None)
    racks = _racks(data, topics) if data.draw(st.booleans()) else None
    got = uniform_assign(members, topics, racks)
    check_valid(members, topics, got)
    load = sizes(got)
    # Local: no member can take a partition it is eligible for from one with 2+ more.
    for a in members:
        for b, held in got.items():
            if load[b] >= load[a] + 2:
                assert not set(held) & set(members[a]["topics"]), (a, b)
    # Global: no chain of hand-overs evens the loads out further.
    assert no_improving_path(members, topics, got)


@PROPS
@given(member_ids_st, topics_st, st.booleans(), st.integers(0, 2**32), st.data())
def test_result_does_not_depend_on_input_order(
    ids: list[str], topics: dict[str, int], same: bool, seed: int, data: st.DataObject
) -> None:
    members = _members(data, ids, topics, data.draw(subscription_st) if same else None)
    racks = _racks(data, topics) if data.draw(st.booleans()) else None
    got = uniform_assign(members, topics, racks)
    members2, topics2 = shuffled(members, topics, seed)
    assert uniform_assign(members2, topics2, racks) == got


@PROPS
@given(member_ids_st, topics_st, st.booleans(), st.data())
def test_assigning_again_changes_nothing(
    ids: list[str], topics: dict[str, int], same: bool, data: st.DataObject
) -> None:
    members = _members(data, ids, topics, data.draw(subscription_st) if same else None)
    racks = _racks(data, topics) if data.draw(st.booleans()) else None
    got = uniform_assign(members, topics, racks)
    assert uniform_assign(with_assigned(members, got), topics, racks) == got


@PROPS
@given(member_ids_st, topics_st, subscription_st, st.data())
def test_member_leaving_moves_only_its_partitions(
    ids: list[str], topics: dict[str, int], subs: list[str], data: st.DataObject
) -> None:
    members = _members(data, ids, topics, subs)
    before = uniform_assign(members, topics)
    leaving = data.draw(st.sampled_from(ids))
    rest = {m: spec for m, spec in with_assigned(members, before).items() if m != leaving}
    if not rest:
        return
    after = uniform_assign(rest, topics)
    check_valid(rest, topics, after)
    for m in rest:
        for t, parts in before[m].items():
            assert set(parts) <= set(after[m].get(t, ())), (m, t)


@PROPS
@given(member_ids_st, topics_st, subscription_st, st.data())
def test_member_joining_moves_only_what_it_receives(
    ids: list[str], topics: dict[str, int], subs: list[str], data: st.DataObject
) -> None:
    members = _members(data, ids[1:], topics, subs) if len(ids) > 1 else {}
    before = uniform_assign(members, topics)
    newcomer = ids[0]
    grown = {**with_assigned(members, before), newcomer: {"topics": subs}}
    after = uniform_assign(grown, topics)
    check_valid(grown, topics, after)
    received = {(t, p) for t, parts in after[newcomer].items() for p in parts}
    assert moved(before, after) == received - _unowned(before, topics, subs)
    total = sum(topics.get(t, 0) for t in set(subs))
    assert len(received) in {total // len(grown), -(-total // len(grown))}


def _unowned(result: GroupAssignment, topics: Mapping[str, int], subs: list[str]) -> set[Any]:
    owned = set(partitions_of(result))
    return {(t, p) for t in set(subs) for p in range(topics.get(t, 0))} - owned


@PROPS
@given(
    st.integers(1, 9),
    st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 12), min_size=1),
    st.integers(0, 2**32),
    st.booleans(),
)
def test_racks_match_whenever_a_balanced_matching_exists(
    n: int, topics: dict[str, int], seed: int, heterogeneous_rest: bool
) -> None:
    # A hidden balanced assignment, and partition racks that make it fully matching (each
    # partition has a replica in its hidden owner's rack, and maybe one elsewhere).
    rng = random.Random(seed)
    ids = [f"m{i}" for i in range(n)]
    rack_of = {m: rng.choice(RACKS) for m in ids}
    partitions = [(t, p) for t in sorted(topics) for p in range(topics[t])]
    rng.shuffle(partitions)
    racks: dict[str, dict[int, list[str]]] = {t: {} for t in topics}
    for i, (t, p) in enumerate(partitions):
        replicas = {rack_of[ids[i % n]], rng.choice(RACKS)}
        racks[t][p] = sorted(replicas) if rng.random() < 0.5 else [rack_of[ids[i % n]]]
    members = {m: {"topics": sorted(topics), "rack": rack_of[m]} for m in ids}
    if heterogeneous_rest:
        # A member without topics makes the group heterogeneous; the rest stay homogeneous.
        members["zz"] = {"topics": [], "rack": "r0"}
    got = uniform_assign(members, topics, racks)
    check_valid(members, topics, got)
    counts = [c for m, c in sizes(got).items() if m != "zz"]
    assert max(counts) - min(counts) <= 1
    if not heterogeneous_rest:
        for tp, m in partitions_of(got).items():
            assert rack_of[m] in racks[tp[0]][tp[1]], (tp, m)
