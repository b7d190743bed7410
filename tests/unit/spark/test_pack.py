"""Packing small offset ranges into shared tasks."""

from __future__ import annotations

from kafkacoord.spark.source.read import OffsetRange, pack


def ranges(*sizes: int) -> list[OffsetRange]:
    return [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]


def test_off_keeps_one_task_per_kafka_partition() -> None:
    assert [len(t) for t in pack(ranges(5, 1, 7), 0)] == [1, 1, 1]


def test_small_ranges_share_and_big_ones_stay_alone() -> None:
    tasks = pack(ranges(5, 1, 500, 7, 3), 10)
    assert [[r.partition for r in t] for t in tasks] == [[2], [0, 1], [3, 4]]
    # Every range appears once and none is split.
    flat = [r for t in tasks for r in t]
    assert sorted(r.partition for r in flat) == [0, 1, 2, 3, 4]
    assert all(sum(r.size for r in t) <= 10 or len(t) == 1 for t in tasks)
