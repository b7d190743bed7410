"""Helpers shared by the assignor tests: partition literals and the validity check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

TP = tuple[str, int]
Assign = Mapping[str, list[TP]]


def tps(*items: str) -> list[TP]:
    """``tps("t1-0", "t2-3")`` -> ``[("t1", 0), ("t2", 3)]``."""
    out = []
    for item in items:
        topic, _, p = item.rpartition("-")
        out.append((topic, int(p)))
    return out


def all_partitions(subs: Mapping[str, list[str]], ppt: Mapping[str, int]) -> set[TP]:
    """Every partition of every topic some member subscribes to."""
    return {(t, p) for t, n in ppt.items() if any(t in s for s in subs.values()) for p in range(n)}


def check_valid(
    subs: Mapping[str, list[str]],
    ppt: Mapping[str, int],
    assignment: Assign,
    *,
    complete: bool = True,
    sort_key: Callable[[TP], Any] | None = None,
) -> None:
    """Every member present, lists sorted, partitions subscribed, none assigned twice;
    with ``complete``, every subscribed partition assigned."""
    assert list(assignment) == list(subs)
    seen: set[TP] = set()
    for member, partitions in assignment.items():
        assert partitions == sorted(partitions, key=sort_key)
        for topic, p in partitions:
            assert topic in subs[member], (member, topic)
            assert 0 <= p < ppt[topic]
            assert (topic, p) not in seen
            seen.add((topic, p))
    if complete:
        assert seen == all_partitions(subs, ppt)
