"""Burrow's evaluator: its own test table's windows, then one case per rule and ordering."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kafkacoord.spark.burrow import (
    Commit,
    Rules,
    Status,
    complete,
    evaluate,
    group_complete,
    group_status,
    lag_at,
    lag_not_decreasing,
    recently_caught_up,
    rewind_index,
    stopped,
    thin,
    worst,
)

NOW = 1_000_000
S = 1_000  # Burrow's table has commit times in ms and "now" in seconds


def window(*entries: tuple[int, int, int | None]) -> list[Commit]:
    return [Commit(offset, ts, lag) for offset, ts, lag in entries]


def steps(
    offsets: list[int], lags: list[int | None], start: int = 100_000, step: int = 100_000
) -> list[Commit]:
    """Burrow's table's windows: one commit every ``step`` ms from ``start``."""
    pairs = zip(offsets, lags, strict=True)
    return [Commit(o, start + i * step, lag) for i, (o, lag) in enumerate(pairs)]


@dataclass(frozen=True)
class Case:
    """One row of Burrow's ``caching_test.go`` table, with each rule's own answer."""

    window: list[Commit]
    broker_offsets: list[int]
    current_lag: int
    now_s: int
    allowed_lag: int
    stopped: bool
    rewind: int | None  # Burrow's -1 is None
    lag_not_decreasing: bool
    recent_lag_zero: bool
    status: Status


RISING = [1000, 2000, 3000, 4000, 5000]
SAME = [1000] * 5
REWOUND = [1000, 2000, 3000, 2000, 4000]
TICKS = [792748079 + i for i in range(15)]
TICK_TIMES = [
    1512224618356, 1512224619362, 1512224620366, 1512224621367, 1512224622370,
    1512224623373, 1512224624378, 1512224625379, 1512224626383, 1512224627383,
    1512224628383, 1512224629388, 1512224630391, 1512224631394, 1512224632397,
]  # fmt: skip
TICKING = [Commit(o, t, 0) for o, t in zip(TICKS, TICK_TIMES, strict=True)]

BURROW_TABLE = [
    # 0: zero lag somewhere: OK.
    Case(steps(RISING, [0, 50, 100, 150, 200]), [5200], 200, 600, 0,
         False, None, True, False, Status.OK),
    # 1: 400s since the last commit equals the span, not more: not stopped.
    Case(steps(RISING, [0, 50, 100, 150, 200]), [5200], 200, 900, 0,
         False, None, True, False, Status.OK),
    # 2: 500s since the last commit: STOP even though a lag in the window was zero (#290).
    Case(steps(RISING, [0, 50, 100, 150, 200]), [5200], 200, 1000, 0,
         True, None, True, False, Status.STOP),
    # 3: STOP with lag always non-zero as well.
    Case(steps(RISING, [50, 100, 150, 200, 250]), [5250], 250, 1000, 0,
         True, None, True, False, Status.STOP),
    # 4: the same offset with lag, but zero lag at the start: OK.
    Case(steps(SAME, [0, 50, 100, 150, 200]), [1200], 200, 600, 0,
         False, None, True, False, Status.OK),
    # 5: the same offset, lag always non-zero: STALL.
    Case(steps(SAME, [100, 150, 200, 250, 300]), [1300], 300, 600, 0,
         False, None, True, False, Status.STALL),
    # 6: STALL when the lag stays the same too.
    Case(steps(SAME, [100] * 5), [1100], 100, 600, 0,
         False, None, True, False, Status.STALL),
    # 7: a rewind the consumer caught back up from, lag decreasing: OK.
    Case(steps(REWOUND, [100, 150, 200, 1250, 300]), [4300], 300, 600, 0,
         False, 3, False, False, Status.OK),
    # 8: no current lag: OK though the commits stopped long ago.
    Case(steps(RISING, [50, 100, 150, 200, 250]), [5250], 0, 1000, 0,
         True, None, True, False, Status.OK),
    # 9: lag always zero in the window, now 931 behind and no commit since: STOP (#290).
    Case(TICKING, [792749024, 792749000, 792748800, 792748600, 792748500], 931, 1512224650, 0,
         True, None, True, False, Status.STOP),
    # 10: as 9, but a recent end offset is at the last commit: not STOP, OK (#303).
    Case(TICKING, [792748094, 792748093, 792748093, 792748093], 1, 1512224650, 0,
         True, None, True, True, Status.OK),
    # 11: as 0 with unknown lags in between, which change nothing.
    Case(steps([1000 + 500 * i for i in range(10)],
               [0, None, 50, None, 100, None, 150, None, 200, None], step=50_000),
         [5700], 200, 600, 0, False, None, True, False, Status.OK),
    # 12: stopped, but the current lag is within the allowed lag: OK.
    Case(steps([1000, 2000, 2000], [2, 1, 1]), [2001], 1, 550, 1,
         True, None, False, False, Status.OK),
    # 13: as 5 with an allowed lag under every lag: still STALL.
    Case(steps(SAME, [100, 150, 200, 250, 300]), [1300], 300, 600, 99,
         False, None, True, False, Status.STALL),
    # 14: as 7 with an allowed lag: still OK.
    Case(steps(REWOUND, [100, 150, 200, 1250, 300]), [4300], 300, 600, 99,
         False, 3, False, False, Status.OK),
    # 15: a rewind not caught back up: REWIND.
    Case(steps([1000, 2000, 3000, 2000, 2500], [100, 150, 200, 1250, 300]), [4300], 300,
         600, 0, False, 3, False, False, Status.REWIND),
]  # fmt: skip


@pytest.mark.parametrize("case", BURROW_TABLE, ids=[str(i) for i in range(len(BURROW_TABLE))])
def test_burrows_own_table(case: Case) -> None:
    now_ms = case.now_s * S
    assert stopped(case.window, now_ms) is case.stopped
    assert rewind_index(case.window) == case.rewind
    assert lag_not_decreasing(case.window) is case.lag_not_decreasing
    assert recently_caught_up(case.window, case.broker_offsets) is case.recent_lag_zero
    rules = Rules(allowed_lag=case.allowed_lag)
    got = evaluate(case.window, case.current_lag, now_ms, case.broker_offsets, rules)
    assert got is case.status


# One case per rule, in Burrow's order, each showing what the rule before it overrides.


def test_an_empty_or_too_incomplete_window_is_ok() -> None:
    assert evaluate([], current_lag=9, now_ms=NOW) is Status.OK
    w = window((10, 1_000, 5), (10, 2_000, 6))  # a STALL once complete enough
    assert evaluate(w, 6, 2_500, rules=Rules(minimum_complete=0.3, intervals=10)) is Status.OK
    assert evaluate(w, 6, 2_500, rules=Rules(minimum_complete=0.2, intervals=10)) is Status.STALL


def test_current_lag_within_allowed_lag_is_ok_before_stop() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 4))
    assert evaluate(w, current_lag=3, now_ms=NOW) is Status.STOP
    assert evaluate(w, current_lag=3, now_ms=NOW, rules=Rules(allowed_lag=3)) is Status.OK
    assert evaluate(w, current_lag=0, now_ms=NOW) is Status.OK


def test_stop_comes_before_rewind_and_zero_lag() -> None:
    w = window((50, 1_000, 0), (40, 2_000, 15))
    assert evaluate(w, current_lag=20, now_ms=3_001) is Status.STOP
    assert evaluate(w, current_lag=20, now_ms=3_000) is Status.REWIND


def test_a_recent_end_offset_at_the_last_commit_excuses_stop() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 4))  # lag goes down: OK unless STOP
    assert evaluate(w, 3, NOW, broker_offsets=[24, 23]) is Status.STOP
    assert evaluate(w, 3, NOW, broker_offsets=[20, 23]) is Status.OK


def test_rewind_comes_before_zero_lag_anywhere() -> None:
    w = window((50, 1_000, 0), (40, 2_000, 15), (45, 3_000, 20))
    assert evaluate(w, current_lag=20, now_ms=3_500) is Status.REWIND


def test_a_rewind_caught_back_up_is_judged_by_the_later_rules() -> None:
    w = window((50, 1_000, 5), (40, 2_000, 15), (50, 3_000, 20))
    assert rewind_index(w) == 1
    assert evaluate(w, current_lag=20, now_ms=3_500) is Status.WARN  # lag never went down
    # Only the first drop counts: the second, never recovered, is not looked at.
    w = window((50, 1_000, 5), (40, 2_000, 15), (60, 3_000, 9), (55, 4_000, 9))
    assert evaluate(w, current_lag=9, now_ms=4_500) is Status.OK


def test_zero_lag_anywhere_in_the_window_is_ok_before_stall_and_warn() -> None:
    w = window((10, 1_000, 0), (10, 2_000, 6), (10, 3_000, 7))
    assert evaluate(w, current_lag=7, now_ms=3_500) is Status.OK
    w = window((10, 1_000, 2), (10, 2_000, 6), (10, 3_000, 7))
    assert evaluate(w, current_lag=7, now_ms=3_500) is Status.STALL
    assert evaluate(w, current_lag=7, now_ms=3_500, rules=Rules(allowed_lag=2)) is Status.OK


def test_committing_the_same_offset_with_lag_is_stall_before_warn() -> None:
    w = window((10, 1_000, 5), (10, 2_000, 6), (10, 3_000, 7))
    assert evaluate(w, current_lag=7, now_ms=3_500) is Status.STALL
    # Unknown lags count for STALL's offsets (Burrow checks every commit).
    w = window((5, 500, None), (10, 1_000, 5), (10, 2_000, 6))
    assert evaluate(w, current_lag=6, now_ms=2_500) is Status.WARN  # 5 -> 10 moved: no STALL


def test_advancing_offsets_with_lag_that_never_drops_is_warn() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 5), (30, 3_000, 8))
    assert evaluate(w, current_lag=8, now_ms=3_500) is Status.WARN


def test_advancing_offsets_with_lag_that_drops_somewhere_is_ok() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 9), (30, 3_000, 6))
    assert evaluate(w, current_lag=6, now_ms=3_500) is Status.OK
    w = window((10, 1_000, 5), (20, 2_000, None), (30, 3_000, 4))  # unknown lags skipped
    assert evaluate(w, current_lag=4, now_ms=3_500) is Status.OK


def test_unknown_end_offset_is_notfound() -> None:
    assert evaluate(window((10, 1_000, 5)), current_lag=None, now_ms=NOW) is Status.NOTFOUND


def test_complete_is_the_share_of_the_window_filled() -> None:
    w = window((10, 1_000, 5), (20, 2_000, 5))
    assert complete(w, Rules(intervals=4)) == 0.5
    assert complete(w * 3, Rules(intervals=4)) == 1.0
    assert group_complete([1.0, 0.5, 1.0, 0.0]) == 0.5
    assert group_complete([]) == 0.0


def test_group_status_is_burrows_ok_warn_err() -> None:
    assert group_status([Status.OK, Status.WARN]) is Status.WARN
    for error in (Status.STOP, Status.STALL, Status.REWIND):
        assert group_status([Status.OK, error, Status.WARN]) is Status.ERR
    assert group_status([Status.NOTFOUND]) is Status.OK  # no partition judged
    assert group_status([]) is Status.OK
    statuses = [Status.OK, Status.WARN, Status.STOP, Status.NOTFOUND]
    assert worst(statuses) is Status.STOP
    assert worst([Status.STOP, Status.STALL]) is Status.STALL  # Burrow's order
    assert worst([Status.STALL, Status.REWIND]) is Status.REWIND
    assert worst([]) is Status.NOTFOUND


def test_thin_keeps_the_newest_offset_at_the_earlier_time() -> None:
    commits = window((1, 0, 1), (2, 400, 2), (3, 900, 3), (4, 2_000, 4), (5, 2_100, 5))
    kept = thin(commits, 1_000)
    assert [(c.offset, c.timestamp_ms, c.lag) for c in kept] == [(3, 0, 3), (5, 2_000, 5)]
    assert [c.offset for c in thin(commits, 0)] == [1, 2, 3, 4, 5]
    # Commits every 400 ms still open a new entry each second.
    steady = [Commit(i, i * 400, 0) for i in range(8)]
    assert [c.timestamp_ms for c in thin(steady, 1_000)] == [0, 1_200, 2_400]


def test_lag_at_uses_the_newest_sample_before_the_commit() -> None:
    samples = [(1_000, 100), (2_000, 150), (3_000, 400)]
    assert lag_at(140, 2_500, samples, max_gap_ms=60_000) == 10
    assert lag_at(160, 2_500, samples, max_gap_ms=60_000) == 0  # sampled before: clamped
    assert lag_at(90, 500, samples, max_gap_ms=600) == 10  # first sample after, near enough
    assert lag_at(90, 500, samples, max_gap_ms=100) is None
    assert lag_at(90, 500, [], max_gap_ms=100) is None
