"""The source's offsets: ``{"topic|partition": next_offset}`` and admission control.

Pure functions, so the planning rules are unit-tested without Kafka or Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeAlias

TopicPartition: TypeAlias = tuple[str, int]
Offsets: TypeAlias = dict[TopicPartition, int]


class OffsetFormatError(ValueError):
    """An offsets map (checkpointed or given as ``startingOffsets``) that cannot be read."""


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, int]:
    """The checkpointed form; sorted so equal offsets serialise identically."""
    return {f"{t}|{p}": int(o) for (t, p), o in sorted(offsets.items())}


def from_json(data: Mapping[str, Any]) -> Offsets:
    offsets: Offsets = {}
    for name, offset in data.items():
        topic, sep, partition = name.rpartition("|")
        if not sep or not topic:
            raise OffsetFormatError(f"offset key {name!r} is not 'topic|partition'")
        try:
            offsets[(topic, int(partition))] = int(offset)
        except (TypeError, ValueError):
            raise OffsetFormatError(f"offset {name!r}: {offset!r} is not an integer") from None
    return offsets


def parse_starting(spec: str) -> str | Offsets:
    """``earliest``, ``latest``, or a JSON offsets map."""
    lowered = spec.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    try:
        data = json.loads(spec)
    except json.JSONDecodeError as exc:
        raise OffsetFormatError(
            f"startingOffsets must be earliest, latest or a JSON map of 'topic|partition' "
            f"to offset, not {spec!r}"
        ) from exc
    if not isinstance(data, dict):
        raise OffsetFormatError("startingOffsets JSON must be an object")
    return from_json(data)


def admit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
          limit: int | None) -> Offsets:  # fmt: skip
    """End offsets for one batch: everything up to ``latest``, at most ``limit`` offsets.

    The limit is shared in proportion to each partition's backlog (largest
    remainders get the leftovers), so every partition with data makes progress
    over batches and the total never exceeds the limit. Compaction gaps make
    the offset count an upper bound on the records read.
    """
    end = {tp: max(latest.get(tp, start.get(tp, 0)), start.get(tp, 0)) for tp in latest}
    for tp, offset in start.items():
        end.setdefault(tp, offset)
    backlog = {tp: end[tp] - start.get(tp, 0) for tp in end if end[tp] > start.get(tp, 0)}
    total = sum(backlog.values())
    if limit is None or total <= limit:
        return end
    shares = {tp: limit * size / total for tp, size in backlog.items()}
    granted = {tp: int(share) for tp, share in shares.items()}
    leftover = limit - sum(granted.values())
    by_remainder = sorted(backlog, key=lambda tp: (-(shares[tp] - granted[tp]), tp))
    for tp in by_remainder[:leftover]:
        granted[tp] += 1
    for tp, size in granted.items():
        end[tp] = start.get(tp, 0) + min(size, backlog[tp])
    return end


def backlog(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> int:
    return sum(max(0, o - start.get(tp, 0)) for tp, o in end.items())
