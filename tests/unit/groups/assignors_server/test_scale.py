"""The large group of ``bench/assignors.py`` (2,000 members, 10,000 partitions), checked for
correctness only; the timings live in the benchmark."""

from __future__ import annotations

import random

from kafkacoord.coordinator.groups.assignors.server import range_assign, uniform_assign

from .support import Members, check_valid, moved, sizes, with_assigned

MEMBERS = 2000
TOPICS = {f"topic-{i:03d}": 100 for i in range(100)}


def _ids(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def test_large_homogeneous_group() -> None:
    rng = random.Random(7)
    *ids, newcomer = _ids(rng, MEMBERS + 1)
    names = sorted(TOPICS)
    members: Members = {m: {"topics": names} for m in ids}
    for assign in (uniform_assign, range_assign):
        fresh = assign(members, TOPICS)
        check_valid(members, TOPICS, fresh)
        grown = {**with_assigned(members, fresh), newcomer: {"topics": names}}
        after = assign(grown, TOPICS)
        check_valid(grown, TOPICS, after)
        received = {(t, p) for t, ps in after[newcomer].items() for p in ps}
        assert moved(fresh, after) == received
        if assign is uniform_assign:
            assert set(sizes(fresh).values()) == {5}
            assert len(received) == 10_000 // (MEMBERS + 1)
            assert max(sizes(after).values()) - min(sizes(after).values()) <= 1
        else:
            assert not received  # 100 partitions per topic: the first 100 members keep theirs


def test_large_heterogeneous_group() -> None:
    rng = random.Random(8)
    names = sorted(TOPICS)
    *ids, newcomer = _ids(rng, MEMBERS + 1)
    members: Members = {m: {"topics": rng.sample(names, 50)} for m in ids}
    got = uniform_assign(members, TOPICS)
    check_valid(members, TOPICS, got)
    assert max(sizes(got).values()) - min(sizes(got).values()) <= 1
    assert uniform_assign(with_assigned(members, got), TOPICS) == got
    grown = {**with_assigned(members, got), newcomer: {"topics": rng.sample(names, 50)}}
    after = uniform_assign(grown, TOPICS)
    check_valid(grown, TOPICS, after)
    assert max(sizes(after).values()) - min(sizes(after).values()) <= 1
    # Subscriptions overlap enough here that the newcomer's share comes straight from others.
    received = {(t, p) for t, ps in after[newcomer].items() for p in ps}
    assert moved(got, after) == received
