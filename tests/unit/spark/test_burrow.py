"""Burrow's evaluation rules, one case per rule and the order they apply in."""

from __future__ import annotations

from kafkacoord.spark.burrow import Commit, Status, evaluate, lag_at, thin, worst

NOW = 1_000_000


def window(*entries: tuple[int, int, int | None]) -> list[Commit]:
    return [Commit(offset, ts, lag) for offset, ts, lag in entries]


def test_zero_lag_anywhere_in_the_window_is_ok() -> None:
    w = window((10, 100, 5), (20, 200, 0), (30, 300, 7))
    assert evaluate(w, current_lag=7, now_ms=NOW) is Status.OK


def test_zero_current_lag_is_ok_even_if_stopped_long_ago() -> None:
    assert evaluate(window((10, 100, 3), (10, 200, 3)), current_lag=0, now_ms=NOW) is Status.OK


def test_a_decreasing_offset_is_a_rewind_before_any_other_rule() -> None:
    w = window((50, 100, 5), (40, 200, 15), (45, 300, 20))
    assert evaluate(w, current_lag=20, now_ms=300) is Status.REWIND


def test_no_commit_for_longer_than_the_window_spans_is_stop() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 4), (30, 3_000, 3))
    assert evaluate(w, current_lag=3, now_ms=5_001) is Status.STOP
    assert evaluate(w, current_lag=3, now_ms=5_000) is Status.OK


def test_committing_the_same_offset_with_lag_is_stall() -> None:
    w = window((10, 1_000, 5), (10, 2_000, 6), (10, 3_000, 7))
    assert evaluate(w, current_lag=7, now_ms=3_500) is Status.STALL


def test_advancing_offsets_with_lag_that_never_drops_is_warn() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 5), (30, 3_000, 8))
    assert evaluate(w, current_lag=8, now_ms=3_500) is Status.WARN


def test_advancing_offsets_with_lag_that_drops_somewhere_is_ok() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 9), (30, 3_000, 6))
    assert evaluate(w, current_lag=6, now_ms=3_500) is Status.OK


def test_unknown_end_offset_is_notfound_and_unknown_lags_are_left_out() -> None:
    assert evaluate(window((10, 1_000, 5)), current_lag=None, now_ms=NOW) is Status.NOTFOUND
    # Only the entries with a known lag count: here that leaves a stalled window.
    w = window((5, 500, None), (10, 1_000, 5), (10, 2_000, 6))
    assert evaluate(w, current_lag=6, now_ms=2_500) is Status.STALL
    assert evaluate(window((10, 1_000, None)), current_lag=4, now_ms=NOW) is Status.OK


def test_thin_keeps_the_newest_commit_of_a_burst() -> None:
    commits = window((1, 0, 1), (2, 400, 1), (3, 900, 1), (4, 2_000, 1), (5, 2_100, 1))
    assert [c.offset for c in thin(commits, 1_000)] == [3, 5]
    assert [c.offset for c in thin(commits, 0)] == [1, 2, 3, 4, 5]


def test_lag_at_uses_the_newest_sample_before_the_commit() -> None:
    samples = [(1_000, 100), (2_000, 150), (3_000, 400)]
    assert lag_at(140, 2_500, samples, max_gap_ms=60_000) == 10
    assert lag_at(160, 2_500, samples, max_gap_ms=60_000) == 0  # sampled before: clamped
    assert lag_at(90, 500, samples, max_gap_ms=600) == 10  # first sample after, near enough
    assert lag_at(90, 500, samples, max_gap_ms=100) is None
    assert lag_at(90, 500, [], max_gap_ms=100) is None


def test_group_worst_and_burrow_group_status() -> None:
    statuses = [Status.OK, Status.WARN, Status.STALL, Status.NOTFOUND]
    assert worst(statuses) is Status.STALL
    assert worst(statuses).group_status == "ERR"
    assert worst([Status.OK, Status.WARN]).group_status == "WARN"
    assert worst([]) is Status.NOTFOUND
    assert worst([Status.STOP, Status.REWIND]) is Status.REWIND
