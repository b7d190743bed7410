"""Lag rings and the Burrow-style status, with no I/O."""

from __future__ import annotations

from kafkacoord.console.lag import LagHistory, LagSample, Status, partition_status

TP = ("t", 0)


def window(*rows: tuple[int, int]) -> list[LagSample]:
    """(committed, end) per sample, one second apart."""
    return [LagSample(i * 1000, committed, end) for i, (committed, end) in enumerate(rows)]


def test_statuses_follow_burrows_rules() -> None:
    assert partition_status(window((5, 10), (10, 10), (12, 20))) is Status.OK  # caught up once
    assert partition_status(window((5, 10), (9, 16), (15, 25))) is Status.WARN  # lag grows
    assert partition_status(window((5, 10), (9, 12), (15, 16))) is Status.OK  # lag shrinks
    assert partition_status(window((5, 10), (5, 12), (5, 20))) is Status.STALL  # no commits
    assert partition_status(window((5, 10), (5, 10), (5, 10))) is Status.STOP  # nothing moves
    assert partition_status(window((5, 10))) is Status.OK  # too little to judge


def test_the_ring_is_bounded_and_sums_per_instant() -> None:
    lag = LagHistory(samples=3, window=3)
    for i in range(5):
        lag.record("g", i * 1000, {("t", 0): 0, ("t", 1): 0}, {("t", 0): i, ("t", 1): 2 * i})
    series = lag.series("g")
    assert [s.at_ms for s in series[("t", 0)]] == [2000, 3000, 4000]
    assert lag.total("g") == [(2000, 6), (3000, 9), (4000, 12)]
    status, per = lag.status("g")
    assert status is Status.STALL and set(per.values()) == {Status.STALL}


def test_deleted_offsets_and_groups_leave_the_history() -> None:
    lag = LagHistory()
    lag.record("g", 0, {("t", 0): 1, ("t", 1): 1}, {("t", 0): 5, ("t", 1): 5})
    lag.record("g", 1000, {("t", 0): 2}, {("t", 0): 5, ("t", 1): 5})
    assert set(lag.series("g")) == {("t", 0)}
    lag.record("h", 0, {TP: 0}, {})  # no end known: nothing recorded
    assert lag.series("h") == {}
    lag.forget(["h"])
    assert lag.series("g") == {}
