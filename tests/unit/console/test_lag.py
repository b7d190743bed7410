"""Lag rings and the Burrow-style status, with no I/O."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kafkacoord.console.lag import LagHistory, LagSample, Status, commits, partition_status
from kafkacoord.server.settings import load_settings
from kafkacoord.spark.burrow import Commit, Rules

TP = ("t", 0)
RULES = Rules()


def window(*rows: tuple[int, int]) -> list[LagSample]:
    """(committed, end) per sample, one second apart."""
    return [LagSample(i * 1000, committed, end) for i, (committed, end) in enumerate(rows)]


def status(samples: list[LagSample], rules: Rules = RULES) -> Status:
    """As of the newest sample, as the console judges it."""
    return partition_status(samples, samples[-1].at_ms if samples else 0, rules)


def test_polled_offsets_become_commits_when_they_change() -> None:
    samples = window((5, 10), (5, 12), (9, 12), (9, 20), (4, 20))
    assert commits(samples) == [Commit(5, 0, 5), Commit(9, 2000, 3), Commit(4, 4000, 16)]


def test_statuses_are_burrows_evaluator_over_the_polled_commits() -> None:
    assert status(window((5, 10), (10, 10), (12, 20))) is Status.OK  # caught up once
    assert status(window((5, 10), (9, 16), (15, 25))) is Status.WARN  # lag grows
    assert status(window((5, 10), (9, 12), (15, 16))) is Status.OK  # lag shrinks
    # The offset does not move while the log does: no new commit seen, so STOP (polling
    # cannot tell a consumer that commits the same offset from one that stopped).
    assert status(window((5, 10), (5, 12), (5, 20))) is Status.STOP
    assert status(window((9, 10), (5, 10), (6, 10))) is Status.REWIND  # not back to 9
    # One commit with lag, seen just now: not stopped, and a one-commit window has a
    # single offset, which Burrow counts as stalled (unless minimum_complete holds it back).
    assert status(window((5, 10))) is Status.STALL
    assert status(window((5, 10)), Rules(minimum_complete=0.2)) is Status.OK
    assert status(window((5, 10), (5, 10))) is Status.STOP  # lag, and no commit since
    assert status(window((5, 10), (5, 10)), Rules(allowed_lag=5)) is Status.OK
    assert status(window((5, 5), (5, 8))) is Status.OK  # end was at the commit lately
    assert status([]) is Status.OK


def test_the_ring_is_bounded_and_sums_per_instant() -> None:
    lag = LagHistory(samples=3, window=3)
    for i in range(5):
        lag.record("g", i * 1000, {("t", 0): 0, ("t", 1): 0}, {("t", 0): i, ("t", 1): 2 * i})
    series = lag.series("g")
    assert [s.at_ms for s in series[("t", 0)]] == [2000, 3000, 4000]
    assert lag.total("g") == [(2000, 6), (3000, 9), (4000, 12)]
    # The committed offset never moves while the log grows: STOP, and the group ERR.
    group, per = lag.status("g")
    assert group is Status.ERR and set(per.values()) == {Status.STOP}
    assert lag.status("g", now_ms=2000)[1][("t", 0)] is Status.STALL  # as of the first sample
    allowing = LagHistory(samples=3, window=3, allowed_lag=8)
    allowing.record("g", 0, {("t", 0): 0}, {("t", 0): 8})
    allowing.record("g", 1000, {("t", 0): 0}, {("t", 0): 8})
    assert allowing.status("g")[0] is Status.OK


def test_deleted_offsets_and_groups_leave_the_history() -> None:
    lag = LagHistory()
    lag.record("g", 0, {("t", 0): 1, ("t", 1): 1}, {("t", 0): 5, ("t", 1): 5})
    lag.record("g", 1000, {("t", 0): 2}, {("t", 0): 5, ("t", 1): 5})
    assert set(lag.series("g")) == {("t", 0)}
    lag.record("h", 0, {TP: 0}, {})  # no end known: nothing recorded
    assert lag.series("h") == {}
    lag.forget(["h"])
    assert lag.series("g") == {}


def test_the_daemons_allowed_lag_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    assert load_settings(None).allowed_lag == 0  # Burrow's default
    monkeypatch.setenv("KAFKACOORD_ALLOWED_LAG", "7")
    assert load_settings(None).allowed_lag == 7
    with pytest.raises(ValidationError, match="allowed_lag"):
        load_settings(None, allowed_lag=-1)
