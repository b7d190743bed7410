"""The plan of an offsets reset, shared by ``kafkacoord groups reset-offsets`` and the console.

Kafka's ``kafka-consumer-groups --reset-offsets`` rules (ConsumerGroupCommand): a target
comes from the log start, the log end, a fixed offset, a shift of the committed offset,
the committed offset itself, or a timestamp lookup. A fixed offset, a shift and a
plan read from a file are clamped into the log's range; the others are taken as found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = [
    "RESET_MODES",
    "ResetMode",
    "at_timestamps",
    "clamp",
    "parse_datetime_ms",
    "parse_duration",
    "reset_plan",
]

TP = tuple[str, int]
ResetMode = Literal["earliest", "latest", "offset", "shift", "current"]
RESET_MODES: tuple[ResetMode, ...] = ("earliest", "latest", "offset", "shift", "current")


def reset_plan(
    mode: ResetMode,
    partitions: Sequence[TP],
    *,
    committed: Mapping[TP, int],
    starts: Mapping[TP, int],
    ends: Mapping[TP, int],
    value: int = 0,
) -> dict[TP, int]:
    """The new offset of each partition (``value``: the offset, or the shift).

    ``shift`` needs a committed offset on every partition (ValueError otherwise, Kafka's
    IllegalArgumentException); ``current`` keeps it, and takes the log end where none is.
    """
    if mode == "earliest":
        return {tp: starts[tp] for tp in partitions}
    if mode == "latest":
        return {tp: ends[tp] for tp in partitions}
    if mode == "current":
        return {tp: committed[tp] if tp in committed else ends[tp] for tp in partitions}
    if mode == "offset":
        return clamp(dict.fromkeys(partitions, value), starts, ends)
    if mode == "shift":
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            topic, partition = missing[0]
            raise ValueError(
                f"Cannot shift offset for partition {topic}-{partition} since there is no "
                "current committed offset"
            )
        return clamp({tp: committed[tp] + value for tp in partitions}, starts, ends)
    raise ValueError(f"unknown reset mode {mode!r}; use one of {', '.join(RESET_MODES)}")


def clamp(
    plan: Mapping[TP, int], starts: Mapping[TP, int], ends: Mapping[TP, int]
) -> dict[TP, int]:
    """Kafka clamps each target into the log's range."""
    return {tp: min(max(offset, starts[tp]), ends[tp]) for tp, offset in plan.items()}


def at_timestamps(found: Mapping[TP, int | None], ends: Mapping[TP, int]) -> dict[TP, int]:
    """A timestamp lookup's plan: the offset found, or the log end where no record is
    at or after the timestamp (``None`` or negative: Kafka's UNKNOWN_OFFSET)."""
    return {
        tp: offset if offset is not None and offset >= 0 else ends[tp]
        for tp, offset in found.items()
    }


# java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part signed, case-insensitive;
# days are exactly 24 hours, and years, months and weeks are not accepted.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> timedelta:
    """``--by-duration``'s ISO-8601 duration, with java.time.Duration.parse's rules."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) in ("T", "t"):
        raise ValueError(f"Text cannot be parsed to a Duration: {text!r} (e.g. PT15M, P1DT2H)")
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"Text cannot be parsed to a Duration: {text!r} (e.g. PT15M, P1DT2H)")
    nanos = int(fraction.ljust(9, "0")) if fraction is not None else 0
    if (seconds or "").startswith("-"):
        nanos = -nanos  # the fraction takes the seconds' sign, as in Java
    try:
        duration = timedelta(
            days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
            seconds=int(seconds or 0), microseconds=nanos / 1000,
        )  # fmt: skip
    except OverflowError as exc:
        raise ValueError(f"Duration {text!r} is too large") from exc
    return -duration if sign == "-" else duration


def parse_datetime_ms(text: str) -> int:
    """``--to-datetime``, as Kafka's Utils.getDateTime reads it: ISO-8601 with a ``T``,
    e.g. 2026-11-01T12:00:00.000, and a zone (Z, +02:00) or none, which means UTC.
    Kafka insists on the milliseconds; they may be left out here."""
    if "T" not in text:
        raise ValueError(f"{text!r} is not YYYY-MM-DDTHH:mm:SS.sss (the 'T' is missing)")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not YYYY-MM-DDTHH:mm:SS.sss[zone]") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
