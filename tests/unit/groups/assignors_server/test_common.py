"""What both server-side assignors share: the registry, input cleaning, the result's shape."""

from __future__ import annotations

import pytest

from kafkacoord.coordinator.groups.assignors.server import (
    DEFAULT_SERVER_ASSIGNOR,
    SERVER_ASSIGNORS,
    ServerAssignor,
    range_assign,
    uniform_assign,
)

from .support import Members

BOTH = pytest.mark.parametrize("assign", [uniform_assign, range_assign], ids=["uniform", "range"])


def test_registry() -> None:
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
    assert SERVER_ASSIGNORS["range"] is range_assign
    assert DEFAULT_SERVER_ASSIGNOR == "uniform"
    assert SERVER_ASSIGNORS[DEFAULT_SERVER_ASSIGNOR] is uniform_assign


@BOTH
def test_no_members(assign: ServerAssignor) -> None:
    assert assign({}, {"t": 3}) == {}


@BOTH
def test_every_member_gets_an_entry(assign: ServerAssignor) -> None:
    members: Members = {"a": {"topics": []}, "b": {"topics": ["t"]}, "c": {"topics": ["t"]}}
    assert assign(members, {"t": 1}) == {"a": {}, "b": {"t": [0]}, "c": {}}


@BOTH
def test_unknown_topics_are_ignored(assign: ServerAssignor) -> None:
    members: Members = {
        "a": {"topics": ["t", "later"]},
        "b": {"topics": ["t", "empty"], "assigned": {"later": [0]}},
    }
    got = assign(members, {"t": 2, "empty": 0, "unrelated": 4})
    assert got == {"a": {"t": [0]}, "b": {"t": [1]}}


@BOTH
def test_stale_partitions_are_dropped(assign: ServerAssignor) -> None:
    members: Members = {
        "a": {"topics": ["t"], "assigned": {"t": [5, 9, -1], "gone": [0, 1]}},
        "b": {"topics": ["t"], "assigned": {"u": [0]}},
    }
    got = assign(members, {"t": 2, "u": 1})
    assert got == {"a": {"t": [0]}, "b": {"t": [1]}}


@BOTH
def test_missing_or_empty_assigned_means_nothing(assign: ServerAssignor) -> None:
    members: Members = {
        "a": {"topics": ["t"], "assigned": {}},
        "b": {"topics": ["t"], "assigned": None},
    }
    assert assign(members, {"t": 2}) == {"a": {"t": [0]}, "b": {"t": [1]}}


@BOTH
def test_partition_claimed_twice_stays_with_the_first_member(assign: ServerAssignor) -> None:
    members = {
        "b": {"topics": ["t"], "assigned": {"t": [0, 1]}},
        "a": {"topics": ["t"], "assigned": {"t": [1, 1]}},
    }
    got = assign(members, {"t": 2})
    assert got == {"a": {"t": [1]}, "b": {"t": [0]}}


@BOTH
def test_results_are_fresh_lists(assign: ServerAssignor) -> None:
    assigned = {"t": [1, 0]}
    members = {"a": {"topics": ["t"], "assigned": assigned}}
    got = assign(members, {"t": 2})
    assert got == {"a": {"t": [0, 1]}}
    got["a"]["t"].append(7)
    assert assigned == {"t": [1, 0]}


@BOTH
def test_topics_as_a_bare_string_is_rejected(assign: ServerAssignor) -> None:
    with pytest.raises(TypeError, match="topics"):
        assign({"a": {"topics": "t"}}, {"t": 1})
