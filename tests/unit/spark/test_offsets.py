"""The source's offsets JSON and its admission control."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.spark.source.offsets import (
    OffsetFormatError,
    admit,
    backlog,
    from_json,
    parse_starting,
    to_json,
)


def test_json_roundtrip_uses_topic_bar_partition_keys() -> None:
    offsets = {("__kc_offsets", 3): 17, ("a|b", 0): 2}
    encoded = to_json(offsets)
    assert encoded == {"__kc_offsets|3": 17, "a|b|0": 2}
    assert from_json(encoded) == offsets


def test_bad_offsets_are_reported() -> None:
    with pytest.raises(OffsetFormatError):
        from_json({"nopartition": 1})
    with pytest.raises(OffsetFormatError):
        from_json({"t|x": 1})
    with pytest.raises(OffsetFormatError):
        parse_starting("yesterday")


def test_starting_offsets_forms() -> None:
    assert parse_starting(" Earliest ") == "earliest"
    assert parse_starting("latest") == "latest"
    assert parse_starting('{"t|0": 5}') == {("t", 0): 5}


def test_no_limit_reads_everything_and_never_goes_back() -> None:
    start = {("t", 0): 10, ("t", 1): 5}
    latest = {("t", 0): 20, ("t", 1): 3, ("t", 2): 4}
    assert admit(start, latest, None) == {("t", 0): 20, ("t", 1): 5, ("t", 2): 4}


def test_limit_is_shared_in_proportion_to_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = admit(start, {("t", 0): 300, ("t", 1): 100}, 100)
    assert end == {("t", 0): 75, ("t", 1): 25}


@given(
    st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 1_000), st.integers(0, 1_000)),
                    min_size=1),
    st.integers(1, 500),
)  # fmt: skip
def test_limit_is_never_exceeded_and_progress_is_made(
    ranges: dict[int, tuple[int, int]], limit: int
) -> None:
    start = {("t", p): a for p, (a, _) in ranges.items()}
    latest = {("t", p): a + b for p, (a, b) in ranges.items()}
    end = admit(start, latest, limit)
    taken = backlog(start, end)
    assert taken <= limit
    assert taken == min(limit, backlog(start, latest))
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
