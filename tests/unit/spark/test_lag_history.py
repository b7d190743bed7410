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


def live(wh: Any) -> list[dict[str, Any]]:
    rows = wh.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]).to_pylist()
    return sorted(rows, key=lambda r: (r["group"], r["partition"], r["bucket_ms"]))


def test_the_newest_sample_of_a_bucket_wins_and_each_bucket_keeps_a_row(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=60 * MINUTE)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 10), ("g", "orders", 1, 0, 5))
    ends = {("orders", 0): (start, 40)}  # partition 1 has no end sample yet: skipped
    for at, end in ((start + 1_000, 40), (start + 30_000, 55), (start + MINUTE + 1, 70)):
        ends[("orders", 0)] = (at, end)
        wh.commit({LAG_SAMPLES: recorder.rows(at, offsets, ends)}, schemas())
    rows = live(wh)
    assert [(r["bucket_ms"], r["log_end_offset"], r["committed_offset"]) for r in rows] == [
        (start, 55, 10),  # the second sample of the first minute replaced the first
        (start + MINUTE, 70, 10),
    ]
    view = read_view(wh, "lag_history", now_ms=start + 2 * MINUTE)
    assert view.column("lag").to_pylist() == [45, 60]
    assert view.column("partition").to_pylist() == [0, 0]


def test_buckets_past_the_retention_get_tombstones(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=10 * MINUTE)
    start = NOW - NOW % MINUTE
    offsets = committed(("g", "orders", 0, 0, 1), ("h", "orders", 0, 0, 2))
    for i in range(3):
        at = start + i * MINUTE
        wh.commit({LAG_SAMPLES: recorder.rows(at, offsets, {("orders", 0): (at, 9)})}, schemas())
    assert len(live(wh)) == 6
    # Eleven minutes on, the first bucket is past the retention; the others are not.
    later = start + 11 * MINUTE
    wh.commit({LAG_SAMPLES: recorder.rows(later, offsets, {("orders", 0): (later, 9)})},
              schemas())  # fmt: skip
    buckets = sorted({r["bucket_ms"] for r in live(wh)})
    assert buckets == [start + MINUTE, start + 2 * MINUTE, later]


def test_a_restarted_recorder_expires_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    start = NOW - NOW % MINUTE
    first = LagRecorder(resolution_ms=MINUTE, retain_ms=5 * MINUTE)
    offsets = committed(("g", "orders", 0, 0, 1))
    wh.commit({LAG_SAMPLES: first.rows(start, offsets, {("orders", 0): (start, 3)})}, schemas())
    second = LagRecorder(resolution_ms=MINUTE, retain_ms=5 * MINUTE)
    second.load(wh.read(LAG_SAMPLES, schemas()[LAG_SAMPLES]))
    later = start + 6 * MINUTE
    wh.commit({LAG_SAMPLES: second.rows(later, committed(), {})}, schemas())
    assert live(wh) == []


def test_the_view_hides_samples_older_than_the_retention(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    recorder = LagRecorder(resolution_ms=MINUTE, retain_ms=365 * 24 * 60 * MINUTE)
    offsets = committed(("g", "orders", 0, 0, 1))
    old = NOW - 8 * 24 * 60 * MINUTE  # older than the default offsets retention (7 days)
    for at in (old, NOW):
        wh.commit({LAG_SAMPLES: recorder.rows(at, offsets, {("orders", 0): (at, 4)})}, schemas())
    assert len(read_view(wh, "lag_history", now_ms=NOW)) == 1
    assert len(read_view(wh, "lag_history", now_ms=NOW, retention_ms=9 * 24 * 3600_000)) == 2


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LagRecorder(resolution_ms=0)
