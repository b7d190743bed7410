"""The plan of an offsets reset, shared by ``kafkacoord groups reset-offsets`` and the console.

Kafka's ``kafka-consumer-groups --reset-offsets`` rules: a target comes from the log
start, the log end, a fixed offset, a shift of the committed offset (0 where none is),
or a timestamp lookup, and is then clamped into the log's range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

__all__ = ["RESET_MODES", "ResetMode", "clamp", "reset_plan"]

TP = tuple[str, int]
ResetMode = Literal["earliest", "latest", "offset", "shift"]
RESET_MODES: tuple[ResetMode, ...] = ("earliest", "latest", "offset", "shift")


def reset_plan(
    mode: ResetMode,
    partitions: Sequence[TP],
    *,
    committed: Mapping[TP, int],
    starts: Mapping[TP, int],
    ends: Mapping[TP, int],
    value: int = 0,
) -> dict[TP, int]:
    """The new offset of each partition (``value``: the offset, or the shift)."""
    if mode == "earliest":
        plan = {tp: starts[tp] for tp in partitions}
    elif mode == "latest":
        plan = {tp: ends[tp] for tp in partitions}
    elif mode == "offset":
        plan = dict.fromkeys(partitions, value)
    elif mode == "shift":
        plan = {tp: committed.get(tp, 0) + value for tp in partitions}
    else:
        raise ValueError(f"unknown reset mode {mode!r}; use one of {', '.join(RESET_MODES)}")
    return clamp(plan, starts, ends)


def clamp(
    plan: Mapping[TP, int], starts: Mapping[TP, int], ends: Mapping[TP, int]
) -> dict[TP, int]:
    """Kafka clamps each target into the log's range."""
    return {tp: min(max(offset, starts[tp]), ends[tp]) for tp, offset in plan.items()}
