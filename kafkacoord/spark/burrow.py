"""Consumer lag evaluation over a sliding window of commits, after Burrow's rules.

A partition's window holds its last N commits (offset, commit time, and the
lag when it was committed). With lag now above zero, the first rule that holds
decides, worst first:

- REWIND: an offset in the window is lower than the one before it;
- STOP: the time since the last commit exceeds the window's span (the consumer
  stopped committing);
- STALL: every commit in the window has the same offset;
- WARN: the lag never goes down over the window (the consumer falls behind);

and otherwise OK. Lag of zero now, or anywhere in the window, is always OK.
Lags are clamped at zero (the end offset can be sampled before the commit).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import pairwise


class Status(str, Enum):
    NOTFOUND = "NOTFOUND"  # no log end offset known: the lag cannot be judged
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @property
    def group_status(self) -> str:
        """Burrow's group-level status: partition errors are ERR."""
        if self in (Status.STALL, Status.STOP, Status.REWIND):
            return "ERR"
        return str(self.value)


_SEVERITY = {s: i for i, s in enumerate(Status)}


@dataclass(frozen=True, slots=True)
class Commit:
    offset: int
    timestamp_ms: int
    lag: int | None = None


def thin(commits: Iterable[Commit], min_distance_ms: int) -> list[Commit]:
    """Oldest first; a commit closer than ``min_distance_ms`` to the previous kept one replaces it.

    Burrow stores a new offset only at some distance from the last, so a
    burst of commits does not fill the window with one moment.
    """
    kept: list[Commit] = []
    for commit in commits:
        if kept and commit.timestamp_ms - kept[-1].timestamp_ms < min_distance_ms:
            kept[-1] = commit
        else:
            kept.append(commit)
    return kept


def lag_at(offset: int, timestamp_ms: int, samples: Sequence[tuple[int, int]],
           max_gap_ms: int) -> int | None:  # fmt: skip
    """The lag when ``offset`` was committed, from ``(sampled_ms, log_end_offset)`` samples.

    Uses the newest sample taken at or before the commit (a consumer that is
    caught up then shows zero); failing that, the first one after it if it is
    within ``max_gap_ms``. None when no sample is near enough.
    """
    if not samples:
        return None
    times = [s[0] for s in samples]
    index = bisect.bisect_right(times, timestamp_ms) - 1
    if index >= 0:
        return max(0, samples[index][1] - offset)
    first_time, first_end = samples[0]
    if first_time - timestamp_ms <= max_gap_ms:
        return max(0, first_end - offset)
    return None


def evaluate(window: Sequence[Commit], current_lag: int | None, now_ms: int) -> Status:
    """The status of one partition; ``window`` oldest first."""
    if current_lag is None:
        return Status.NOTFOUND
    known = [c for c in window if c.lag is not None]
    if current_lag <= 0 or not known or any(c.lag == 0 for c in known):
        return Status.OK
    pairs = list(pairwise(known))
    if any(later.offset < earlier.offset for earlier, later in pairs):
        return Status.REWIND
    first, last = known[0], known[-1]
    if now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms:
        return Status.STOP
    if all(later.offset == earlier.offset for earlier, later in pairs):
        return Status.STALL
    if all((later.lag or 0) >= (earlier.lag or 0) for earlier, later in pairs):
        return Status.WARN
    return Status.OK


def worst(statuses: Iterable[Status]) -> Status:
    """The group's worst partition status (NOTFOUND only if nothing else is known)."""
    return max(statuses, key=lambda s: s.severity, default=Status.NOTFOUND)
