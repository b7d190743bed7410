"""Server-side range assignor: Kafka's examples, co-partitioning, stickiness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors import range_assign as client_range_assign
from kafkacoord.coordinator.groups.assignors.server import GroupAssignment, range_assign

from .support import (
    PROPS,
    TOPICS,
    Members,
    check_valid,
    claims_st,
    member_ids_st,
    shuffled,
    subscription_st,
    topics_st,
    with_assigned,
)


def classic_range(
    members: Mapping[str, Mapping[str, Any]], topics: Mapping[str, int]
) -> GroupAssignment:
    """The plain range layout: per topic, subscribers by member id, the first ``P % N`` with
    one partition more."""
    out: GroupAssignment = {m: {} for m in members}
    for t, count in topics.items():
        subs = sorted(m for m, spec in members.items() if t in spec["topics"])
        if not subs or count <= 0:
            continue
        quota, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = quota + (1 if i < extra else 0)
            if n:
                out[m][t] = list(range(start, start + n))
            start += n
    return out


# --------------------------------------------------------------------------- examples


def test_kafka_doc_example() -> None:
    members = {"A": {"topics": ["t1", "t2"]}, "B": {"topics": ["t1", "t2"]}}
    assert range_assign(members, {"t1": 3, "t2": 3}) == {
        "A": {"t1": [0, 1], "t2": [0, 1]},
        "B": {"t1": [2], "t2": [2]},
    }


def test_members_in_id_order_not_input_order() -> None:
    members = {"b": {"topics": ["t"]}, "a": {"topics": ["t"]}}
    assert range_assign(members, {"t": 3}) == {"a": {"t": [0, 1]}, "b": {"t": [2]}}


def test_heterogeneous_ranges_per_topic() -> None:
    members = {
        "a": {"topics": ["t1"]},
        "b": {"topics": ["t1", "t2"]},
        "c": {"topics": ["t1"]},
    }
    assert range_assign(members, {"t1": 3, "t2": 2}) == {
        "a": {"t1": [0]},
        "b": {"t1": [1], "t2": [0, 1]},
        "c": {"t1": [2]},
    }


def test_more_members_than_partitions() -> None:
    members = {m: {"topics": ["t"]} for m in ("a", "b", "c")}
    assert range_assign(members, {"t": 2}) == {"a": {"t": [0]}, "b": {"t": [1]}, "c": {}}


def test_member_joining_keeps_the_others_partitions() -> None:
    # Kafka 3.5-3.8's sticky rule: a keeps its two (the extra partition stays with the first
    # member over the minimum), b keeps its lowest, c takes what is left.
    members: Members = {
        "a": {"topics": ["t"], "assigned": {"t": [0, 1]}},
        "b": {"topics": ["t"], "assigned": {"t": [2, 3]}},
        "c": {"topics": ["t"]},
    }
    assert range_assign(members, {"t": 4}) == {"a": {"t": [0, 1]}, "b": {"t": [2]}, "c": {"t": [3]}}


def test_member_leaving_hands_its_range_to_the_others() -> None:
    members = {
        "a": {"topics": ["t"], "assigned": {"t": [0, 1]}},
        "c": {"topics": ["t"], "assigned": {"t": [4, 5]}},
    }
    assert range_assign(members, {"t": 6}) == {"a": {"t": [0, 1, 2]}, "c": {"t": [3, 4, 5]}}


def test_racks_are_ignored() -> None:
    members = {"a": {"topics": ["t"], "rack": "r1"}, "b": {"topics": ["t"], "rack": "r0"}}
    racks = {"t": {0: ["r0"], 1: ["r1"]}}
    assert range_assign(members, {"t": 2}, racks) == {"a": {"t": [0]}, "b": {"t": [1]}}


# --------------------------------------------------------------------------- properties


def _members(data: st.DataObject, ids: list[str], topics: Mapping[str, int], subs: Any) -> Members:
    out: Members = {}
    for m in ids:
        spec: dict[str, Any] = {"topics": subs if subs is not None else data.draw(subscription_st)}
        if data.draw(st.booleans()):
            spec["assigned"] = data.draw(claims_st(topics))
        out[m] = spec
    return out


@PROPS
@given(member_ids_st, topics_st, st.booleans(), st.integers(0, 2**32), st.data())
def test_valid_deterministic_idempotent(
    ids: list[str], topics: dict[str, int], same: bool, seed: int, data: st.DataObject
) -> None:
    members = _members(data, ids, topics, data.draw(subscription_st) if same else None)
    got = range_assign(members, topics)
    check_valid(members, topics, got)
    members2, topics2 = shuffled(members, topics, seed)
    assert range_assign(members2, topics2) == got
    assert range_assign(with_assigned(members, got), topics) == got


@PROPS
@given(member_ids_st, topics_st, st.data())
def test_fresh_assignment_is_the_classic_range(
    ids: list[str], topics: dict[str, int], data: st.DataObject
) -> None:
    members = {m: {"topics": data.draw(subscription_st)} for m in ids}
    got = range_assign(members, topics)
    assert got == classic_range(members, topics)
    if any(ord(c) > 0xFFFF for m in ids for c in m):
        return  # Java orders these ids by UTF-16 code units, Python by code points.
    # Kafka's client-side RangeAssignor lays out the same ranges (no member is static).
    client = client_range_assign(
        {m: spec["topics"] for m, spec in members.items()},
        {t: n for t, n in topics.items() if n > 0},
    )
    assert {m: sorted((t, p) for t, ps in held.items() for p in ps) for m, held in got.items()} == {
        m: sorted(tps) for m, tps in client.items()
    }


@PROPS
@given(
    st.lists(st.sampled_from(TOPICS), min_size=1, unique=True),
    st.integers(1, 12),
    st.lists(st.tuples(st.booleans(), st.integers(0, 30)), min_size=1, max_size=8),
)
def test_co_partitioned_through_joins_and_leaves(
    names: list[str], count: int, steps: list[tuple[bool, int]]
) -> None:
    """Same topics, same counts: each member holds the same partition numbers of each topic,
    on a fresh group and after every join and leave that follows."""
    topics = dict.fromkeys(names, count)
    current: GroupAssignment = {}
    alive: list[str] = []
    for joining, n in steps:
        if joining or not alive:
            alive.append(f"m{n:02d}-{len(alive)}")
        else:
            alive.pop(n % len(alive))
        if not alive:
            current = {}
            continue
        members = {m: {"topics": names, "assigned": current.get(m, {})} for m in alive}
        after = range_assign(members, topics)
        check_valid(members, topics, after)
        for m, held in after.items():
            layouts = {tuple(held.get(t, ())) for t in names}
            assert len(layouts) == 1, (m, held)
        # Sticky: every member keeps its lowest partitions up to the new share.
        quota = count // len(alive)
        for m in alive:
            for t, parts in current.get(m, {}).items():
                assert set(parts[:quota]) <= set(after[m].get(t, ())), (m, t)
        current = after


@PROPS
@given(member_ids_st, topics_st, st.data())
def test_members_keep_their_share_after_a_change(
    ids: list[str], topics: dict[str, int], data: st.DataObject
) -> None:
    members = _members(data, ids, topics, None)
    before = range_assign(members, topics)
    changed = with_assigned(members, before)
    if data.draw(st.booleans()) or len(ids) == 1:
        changed["new"] = {"topics": data.draw(subscription_st)}
    else:
        del changed[data.draw(st.sampled_from(ids))]
    after = range_assign(changed, topics)
    check_valid(changed, topics, after)
    for t, count in topics.items():
        subs = [m for m, spec in changed.items() if t in spec["topics"]]
        if not subs or count <= 0:
            continue
        quota = count // len(subs)
        for m in subs:
            mine = before.get(m, {}).get(t, [])
            assert set(mine[:quota]) <= set(after[m].get(t, ())), (m, t)
