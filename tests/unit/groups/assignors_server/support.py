"""Helpers shared by the server-side assignor tests: checks, movement counts, strategies."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors.server import GroupAssignment

Members = dict[str, dict[str, Any]]
TP = tuple[str, int]

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOPICS = ["t0", "t1", "t2", "t3", "t4"]
# Sorted differently by code point than by length or case: member order must be by id.
MEMBER_IDS = [f"m{i}" for i in range(9)] + ["M", "b", "\U0001f600", "\uff61", "m10"]
RACKS = ["r0", "r1", "r2"]

member_ids_st = st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=8, unique=True)
# A count of 0 stands for a topic that does not exist yet.
topics_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), max_size=5)
subscription_st = st.lists(st.sampled_from([*TOPICS, "ghost"]), unique=True, max_size=5)


@st.composite
def claims_st(draw: st.DrawFn, topics: Mapping[str, int]) -> dict[str, list[int]]:
    """A possibly stale, possibly overlapping current assignment of one member."""
    names = [*topics, "gone"]
    return draw(
        st.dictionaries(
            st.sampled_from(names), st.lists(st.integers(-1, 14), max_size=6), max_size=4
        )
    )


def partitions_of(result: GroupAssignment) -> dict[TP, str]:
    """Partition -> owner; fails on a partition assigned twice."""
    owner: dict[TP, str] = {}
    for member, held in result.items():
        for topic, parts in held.items():
            for p in parts:
                assert (topic, p) not in owner, (topic, p)
                owner[(topic, p)] = member
    return owner


def check_valid(
    members: Mapping[str, Mapping[str, Any]], topics: Mapping[str, int], result: GroupAssignment
) -> None:
    """Every member present; topics non-empty and sorted; every subscribed, existing partition
    assigned exactly once, and only to a subscriber."""
    assert set(result) == set(members)
    owner = partitions_of(result)
    for member, held in result.items():
        subscribed = set(members[member].get("topics") or ())
        for topic, parts in held.items():
            assert parts, (member, topic)
            assert parts == sorted(parts)
            assert topic in subscribed, (member, topic)
            assert all(0 <= p < topics[topic] for p in parts)
    wanted = {
        (t, p)
        for spec in members.values()
        for t in spec.get("topics") or ()
        for p in range(topics.get(t, 0))
    }
    assert set(owner) == wanted


def sizes(result: GroupAssignment) -> dict[str, int]:
    return {m: sum(map(len, held.values())) for m, held in result.items()}


def moved(before: GroupAssignment, after: GroupAssignment) -> set[TP]:
    """Partitions owned before and owned by someone else after."""
    owner = partitions_of(before)
    now = partitions_of(after)
    return {tp for tp, m in now.items() if tp in owner and owner[tp] != m}


def with_assigned(members: Mapping[str, Mapping[str, Any]], result: GroupAssignment) -> Members:
    return {m: {**spec, "assigned": result.get(m, {})} for m, spec in members.items()}


def shuffled(
    members: Members, topics: Mapping[str, int], seed: int
) -> tuple[Members, dict[str, int]]:
    """The same inputs in another iteration order (members, topic lists, assignments)."""
    rng = random.Random(seed)
    out: Members = {}
    ids = list(members)
    rng.shuffle(ids)
    for m in ids:
        spec = dict(members[m])
        subs = list(spec.get("topics") or ())
        rng.shuffle(subs)
        spec["topics"] = subs
        assigned = [
            (t, rng.sample(list(ps), len(ps))) for t, ps in (spec.get("assigned") or {}).items()
        ]
        rng.shuffle(assigned)
        spec["assigned"] = dict(assigned)
        keys = list(spec)
        rng.shuffle(keys)
        out[m] = {k: spec[k] for k in keys}
    names = list(topics)
    rng.shuffle(names)
    return out, {t: topics[t] for t in names}


def no_improving_path(
    members: Mapping[str, Mapping[str, Any]], topics: Mapping[str, int], result: GroupAssignment
) -> bool:
    """No chain of single-partition hand-overs, each to a subscriber of the partition's topic,
    runs from a member to one with two or more partitions fewer (balance is then optimal)."""
    load = sizes(result)
    subscribers: dict[str, list[str]] = {}
    for m, spec in members.items():
        for t in spec.get("topics") or ():
            if topics.get(t, 0) > 0:
                subscribers.setdefault(t, []).append(m)
    for start in members:
        seen = {start}
        queue = deque([start])
        while queue:
            x = queue.popleft()
            for t in result[x]:
                for y in subscribers[t]:
                    if y not in seen:
                        if load[y] <= load[start] - 2:
                            return False
                        seen.add(y)
                        queue.append(y)
    return True
