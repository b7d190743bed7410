"""The end of a log as of an instant, by bisection (storage.ends_at.first_after): over
logs held in memory, with gaps, a clock that went backwards and every instant."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kafkacoord.storage.ends_at import RecordAt, first_after


def log_of(records: Sequence[tuple[int, int]]) -> tuple[RecordAt, list[int]]:
    """A reader over (offset, timestamp) records, and the offsets it was asked for."""
    asked: list[int] = []

    def record_at(offset: int) -> tuple[int, int] | None:
        asked.append(offset)
        return next(((o, t) for o, t in records if o >= offset), None)

    return record_at, asked


def expected(records: Sequence[tuple[int, int]], end: int, instant: int) -> int:
    return next((o for o, t in records if t > instant), end)


@pytest.mark.parametrize("gaps", [False, True])
def test_every_instant_ends_at_the_first_record_stamped_after_it(gaps: bool) -> None:
    # Batches of records with one time each (as a producer's linger makes them).
    records = [(o, 1_000 + (o // 4) * 10) for o in range(5, 45)]
    if gaps:  # compacted keys and transaction markers leave offsets without records
        records = [(o, t) for o, t in records if o % 3 != 0]
    for instant in range(990, 1_120):
        record_at, asked = log_of(records)
        assert first_after(record_at, 5, 45, instant) == expected(records, 45, instant)
        assert len(asked) <= 7  # about log2 of the records, not all of them


def test_an_empty_log_and_a_log_all_after_or_all_before() -> None:
    assert first_after(log_of([])[0], 0, 0, 5) == 0
    records = [(o, 100) for o in range(10)]
    assert first_after(log_of(records)[0], 0, 10, 99) == 0
    assert first_after(log_of(records)[0], 0, 10, 100) == 10
