"""Every reset scenario's plan, with kafka-consumer-groups' rules (ConsumerGroupCommand)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafkacoord.client.offset_reset import (
    at_timestamps,
    clamp,
    parse_datetime_ms,
    parse_duration,
    reset_plan,
)

A, B, C = ("t", 0), ("t", 1), ("u", 0)
STARTS = {A: 10, B: 0, C: 5}
ENDS = {A: 100, B: 50, C: 5}  # C is empty: its start is its end
COMMITTED = {A: 40, B: 60}  # B's commit is past its log end (the log was truncated)


def plan(mode: Any, value: int = 0, partitions: tuple[tuple[str, int], ...] = (A, B, C)) -> dict:
    return reset_plan(mode, list(partitions), committed=COMMITTED, starts=STARTS, ends=ENDS,
                      value=value)  # fmt: skip


def test_earliest_and_latest_are_the_log_bounds() -> None:
    assert plan("earliest") == {A: 10, B: 0, C: 5}
    assert plan("latest") == {A: 100, B: 50, C: 5}


def test_to_offset_is_clamped_into_each_log() -> None:
    assert plan("offset", 30) == {A: 30, B: 30, C: 5}
    assert plan("offset", 0) == {A: 10, B: 0, C: 5}
    assert plan("offset", 1_000) == {A: 100, B: 50, C: 5}


def test_shift_moves_the_committed_offset_and_clamps() -> None:
    assert plan("shift", -5, (A, B)) == {A: 35, B: 50}
    assert plan("shift", -45, (A, B)) == {A: 10, B: 15}


def test_shift_without_a_committed_offset_is_refused_as_kafka_does() -> None:
    with pytest.raises(ValueError, match="Cannot shift offset for partition u-0 since there is no"):
        plan("shift", 1)


def test_to_current_keeps_commits_unclamped_and_takes_the_log_end_where_none_is() -> None:
    # Kafka neither clamps --to-current nor needs a commit: a partition without one
    # gets its log end.
    assert plan("current") == {A: 40, B: 60, C: 5}


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown reset mode"):
        plan("sideways")


def test_clamp() -> None:
    assert clamp({A: 5, B: 20, C: 9}, STARTS, ENDS) == {A: 10, B: 20, C: 5}


def test_a_timestamp_with_no_record_at_or_after_it_falls_back_to_the_log_end() -> None:
    assert at_timestamps({A: 42, B: None, C: -1}, ENDS) == {A: 42, B: 50, C: 5}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT15M", timedelta(minutes=15)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("P2D", timedelta(days=2)),
        ("pt1h30m", timedelta(hours=1, minutes=30)),
        ("PT20.345S", timedelta(seconds=20, milliseconds=345)),
        ("PT20,5S", timedelta(seconds=20.5)),
        ("PT-6H3M", timedelta(hours=-6, minutes=3)),
        ("-PT6H3M", -timedelta(hours=6, minutes=3)),
        ("-PT-6H+3M", timedelta(hours=6, minutes=-3)),
        ("PT-0.5S", timedelta(seconds=-0.5)),
        ("PT0S", timedelta(0)),
    ],
)
def test_durations_parse_as_java_time_duration_parses_them(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "15M", "P1Y", "P1M", "P1W", "PT1.5H",
                                  "PT1H ", "P1DT1H1M1.0123456789S"])  # fmt: skip
def test_what_java_time_duration_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="cannot be parsed to a Duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-11-01T12:00:00.000", "2026-11-01T12:00:00"),  # no zone: UTC, as in Kafka
        ("2026-11-01T12:00:00", "2026-11-01T12:00:00"),
        ("2026-11-01T12:00:00.250Z", "2026-11-01T12:00:00.250"),
        ("2026-11-01T14:00:00.000+02:00", "2026-11-01T12:00:00"),
        ("2026-11-01T07:00:00.000-0500", "2026-11-01T12:00:00"),
    ],
)
def test_datetimes_parse_as_kafka_reads_them(text: str, utc: str) -> None:
    expected = datetime.fromisoformat(utc).replace(tzinfo=UTC).timestamp() * 1000
    assert parse_datetime_ms(text) == int(expected)


@pytest.mark.parametrize("text", ["2026-11-01", "12:00:00", "2026-11-01T25:00:00", "yesterday"])
def test_what_is_not_a_kafka_datetime_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="YYYY-MM-DDTHH:mm:SS"):
        parse_datetime_ms(text)
