"""``--as-of`` and ``--since``: an instant given as ISO-8601 or relative to now.

``2026-11-28T03:12:00Z`` (no zone means UTC, as ``--to-datetime``), ``-15m``,
``-2h``, ``-1d``, ``-90s``, ``-1h30m``, or an ISO-8601 duration back from now
(``-PT15M``). Epoch milliseconds are accepted too, as Kafka's tools print them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from .offset_reset import parse_datetime_ms, parse_duration

__all__ = ["format_instant", "parse_instant"]

_UNIT_MS: Final = {
    "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000
}  # fmt: skip
_RELATIVE: Final = re.compile(r"-((?:[0-9]+(?:ms|[smhdw]))+)")
_PART: Final = re.compile(r"([0-9]+)(ms|[smhdw])")
_EXAMPLES: Final = "e.g. 2026-11-28T03:12:00Z, -15m, -1h30m, -PT15M"


def parse_instant(text: str, now_ms: int) -> int:
    """Epoch milliseconds of ``text``; ValueError naming the accepted forms otherwise.
    An instant after ``now_ms`` is refused: history has no future."""
    text = text.strip()
    instant = _parse(text, now_ms)
    if instant > now_ms:
        raise ValueError(f"{text!r} is in the future ({format_instant(instant)})")
    return instant


def _parse(text: str, now_ms: int) -> int:
    relative = _RELATIVE.fullmatch(text.lower())
    if relative is not None:
        back = sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(relative.group(1)))
        return now_ms - back
    if text[:2].upper() == "-P":
        return now_ms - parse_duration(text[1:]) // timedelta(milliseconds=1)
    if text.isdigit():
        return int(text)
    try:
        return parse_datetime_ms(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an instant ({_EXAMPLES})") from None


def format_instant(ms: int) -> str:
    """ISO-8601 in UTC to the millisecond, as the commands print instants."""
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
