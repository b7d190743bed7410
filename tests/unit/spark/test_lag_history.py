"""Lag over time in the warehouse: buckets, expiry, resume, and the ``lag_history`` view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkacoord.spark.lag_history import LAG_SAMPLES, LagRecorder
from kafkacoord.spark.tables import schemas
from kafkacoord.spark.views import read_view

from .warehouse_rows import NOW, warehouse

MINUTE = 60_000


def committed(*rows: tuple[str, str, int, int, int]) -> list[tuple[str, str, int, int, int]]:
    return list(rows)


def record(wh: Any, recorder: LagRecorder, at: int, offsets: Any, ends: Any) -> int:
    """One sampler round: its rows committed, then recorded; returns how many rows."""
    rows = recorder.rows(at, offsets, ends)
    wh.commit({LAG_SAMPLES: rows}, schemas())
    recorder.recorded(at, rows)
    return int(rows.num_rows)


def live(wh: Any) -> list[dict[str, Any]]:
    rows = wh.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]).to_pylist()
    return sorted(rows, key=lambda r: (r["group"], r["partition"], r["bucket_ms"]))


def test_the_first_round_of_a_bucket_writes_it_and_each_bucket_keeps_a_row(
    tmp_path: Path,
) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=60 * MINUTE)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 10), ("g", "orders", 1, 0, 5))
    ends = {("orders", 0): (start, 40)}  # partition 1 has no end sample yet: skipped
    written = []
    for at, end in ((start + 1_000, 40), (start + 30_000, 55), (start + MINUTE + 1, 70)):
        ends[("orders", 0)] = (at, end)
        written.append(record(wh, recorder, at, offsets, ends))
    assert written == [1, 0, 1]  # the second round of the first minute wrote nothing
    rows = live(wh)
    assert [(r["bucket_ms"], r["log_end_offset"], r["committed_offset"]) for r in rows] == [
        (start, 40, 10),
        (start + MINUTE, 70, 10),
    ]
    view = read_view(wh, "lag_history", now_ms=start + 2 * MINUTE)
    assert view.column("lag").to_pylist() == [30, 60]
    assert view.column("partition").to_pylist() == [0, 0]


def test_a_rewrite_replaces_the_rows_of_a_bucket_already_written(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=60 * MINUTE)
    start = NOW - NOW % MINUTE
    record(wh, recorder, start, committed(("g", "orders", 0, 0, 10)), {("orders", 0): (start, 40)})
    at = start + 20_000
    rows = recorder.rows(at, committed(("g", "orders", 0, 0, 30)), {("orders", 0): (at, 50)},
                         rewrite=True)  # fmt: skip
    wh.commit({LAG_SAMPLES: rows}, schemas())
    recorder.recorded(at, rows)
    assert [(r["committed_offset"], r["log_end_offset"], r["sampled_ms"]) for r in live(wh)] == [
        (30, 50, at)
    ]


def test_a_bucket_whose_commit_failed_is_written_by_the_next_round(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=60 * MINUTE)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 10))
    lost = recorder.rows(start + 1_000, offsets, {("orders", 0): (start + 1_000, 40)})
    assert lost.num_rows == 1 and recorder.due(start + 1_000)  # never committed nor recorded
    assert record(wh, recorder, start + 6_000, offsets, {("orders", 0): (start + 6_000, 44)}) == 1
    assert not recorder.due(start + 11_000)
    assert [r["log_end_offset"] for r in live(wh)] == [44]


def test_a_restarted_recorder_does_not_write_a_bucket_again(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 1))
    record(wh, LagRecorder(resolution_ms=MINUTE), start, offsets, {("orders", 0): (start, 3)})
    again = LagRecorder(resolution_ms=MINUTE)
    again.load(wh.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]))
    assert not again.due(start + 30_000) and again.due(start + MINUTE)


def test_buckets_past_the_retention_get_tombstones(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=10 * MINUTE)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 1), ("h", "orders", 0, 0, 2))
    for i in range(3):
        at = start + i * MINUTE
        record(wh, recorder, at, offsets, {("orders", 0): (at, 9)})
    assert len(live(wh)) == 6
    # Eleven minutes on, the first bucket is past the retention; the others are not.
    later = start + 11 * MINUTE
    record(wh, recorder, later, offsets, {("orders", 0): (later, 9)})
    buckets = sorted({r["bucket_ms"] for r in live(wh)})
    assert buckets == [start + MINUTE, start + 2 * MINUTE, later]


def test_a_restarted_recorder_expires_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    start = NOW - NOW % MINUTE
    first = LagRecorder(resolution_ms=MINUTE, retain_ms=5 * MINUTE)
    offsets = committed(("g", "orders", 0, 0, 1))
    record(wh, first, start, offsets, {("orders", 0): (start, 3)})
    second = LagRecorder(resolution_ms=MINUTE, retain_ms=5 * MINUTE)
    second.load(wh.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]))
    later = start + 6 * MINUTE
    record(wh, second, later, committed(), {})
    assert live(wh) == []
    assert not second.due(later)  # the expired bucket is forgotten; the new one is written


def test_the_view_hides_samples_older_than_the_retention(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=365 * 24 * 60 * MINUTE)
    offsets = committed(("g", "orders", 0, 0, 1))
    old = NOW - 8 * 24 * 60 * MINUTE  # older than the default offsets retention (7 days)
    for at in (old, NOW):
        record(wh, recorder, at, offsets, {("orders", 0): (at, 4)})
    assert len(read_view(wh, "lag_history", now_ms=NOW)) == 1
    assert len(read_view(wh, "lag_history", now_ms=NOW, retention_ms=9 * 24 * 3600_000)) == 2


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LagRecorder(resolution_ms=0)
