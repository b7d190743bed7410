"""Consumer lag status over a sliding window of commits: Burrow's evaluator, rule for rule.

A partition's window holds its last N commits, oldest first (offset, commit time,
and the lag when it was committed, unknown when no end offset was near); next to
it, the last N sampled log end offsets (Burrow's broker offsets). Burrow's
``core/internal/evaluator`` applies, in this order, the first that holds deciding:

1. an empty window, or one less ``complete`` (commits / N) than ``minimum_complete``: OK;
2. current lag at most ``allowed_lag``: OK;
3. STOP: the time since the last commit exceeds the window's span, unless a sampled
   end offset is at or below the last committed offset (caught up recently);
4. REWIND: an offset is lower than the one before it (the first such drop), and no
   later offset gets back to the one before the drop;
5. a lag at most ``allowed_lag`` anywhere in the window: OK;
6. STALL: every commit in the window has the same offset;
7. WARN: the known lags never go down over the window;
8. otherwise OK.

A group's status is its worst partition's, STOP, STALL and REWIND counting as ERR;
its ``complete`` is the share of its partitions whose window is full. kafkacoord adds
NOTFOUND for a partition whose log end offset is unknown (no lag to judge); it does
not raise the group's status. Pure: no I/O and no clock (``now_ms`` is given).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import pairwise


class Status(str, Enum):
    """Burrow's status constants, in its order (the severity)."""

    NOTFOUND = "NOTFOUND"
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"  # groups only
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {s: i for i, s in enumerate(Status)}


@dataclass(frozen=True, slots=True)
class Commit:
    offset: int
    timestamp_ms: int
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class Rules:
    """Burrow's evaluator settings (``intervals`` is its storage's window length)."""

    allowed_lag: int = 0
    minimum_complete: float = 0.0
    intervals: int = 10


BURROW_DEFAULTS = Rules()


def thin(commits: Iterable[Commit], min_distance_ms: int) -> list[Commit]:
    """Oldest first; a commit closer than ``min_distance_ms`` to the previous kept one
    replaces it, keeping that one's time.

    Burrow's storage min-distance: keeping the earlier time means commits more
    frequent than the distance still open a new entry once the distance has passed.
    """
    kept: list[Commit] = []
    for commit in commits:
        if kept and commit.timestamp_ms - kept[-1].timestamp_ms < min_distance_ms:
            kept[-1] = Commit(commit.offset, kept[-1].timestamp_ms, commit.lag)
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


def complete(window: Sequence[Commit], rules: Rules = BURROW_DEFAULTS) -> float:
    """How full the window is, 0.0 to 1.0 (Burrow's partition ``complete``)."""
    return min(1.0, len(window) / rules.intervals) if rules.intervals > 0 else 1.0


def evaluate(
    window: Sequence[Commit],
    current_lag: int | None,
    now_ms: int,
    broker_offsets: Sequence[int] = (),
    rules: Rules = BURROW_DEFAULTS,
) -> Status:
    """The status of one partition; ``window`` and ``broker_offsets`` oldest first."""
    if current_lag is None:
        return Status.NOTFOUND
    if not window or complete(window, rules) < rules.minimum_complete:
        return Status.OK
    if current_lag <= rules.allowed_lag:
        return Status.OK
    if stopped(window, now_ms) and not recently_caught_up(window, broker_offsets):
        return Status.STOP
    drop = rewind_index(window)
    if drop is not None and not rewind_recovered(window, drop):
        return Status.REWIND
    if any(c.lag is not None and c.lag <= rules.allowed_lag for c in window):
        return Status.OK
    if all(later.offset == earlier.offset for earlier, later in pairwise(window)):
        return Status.STALL
    if lag_not_decreasing(window):
        return Status.WARN
    return Status.OK


def stopped(window: Sequence[Commit], now_ms: int) -> bool:
    first, last = window[0], window[-1]
    return now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms


def recently_caught_up(window: Sequence[Commit], broker_offsets: Sequence[int]) -> bool:
    """A sampled end offset at or below the last commit: the lag was zero lately."""
    last = window[-1].offset
    return any(end <= last for end in broker_offsets)


def rewind_index(window: Sequence[Commit]) -> int | None:
    """The index of the first commit lower than the one before it."""
    for index in range(1, len(window)):
        if window[index].offset < window[index - 1].offset:
            return index
    return None


def rewind_recovered(window: Sequence[Commit], index: int) -> bool:
    """A commit from ``index`` on gets back to the offset before the drop."""
    before = window[index - 1].offset
    return any(c.offset >= before for c in window[index:])


def lag_not_decreasing(window: Sequence[Commit]) -> bool:
    """No known lag is lower than the known one before it (unknown lags skipped)."""
    lags = [c.lag for c in window if c.lag is not None]
    return all(later >= earlier for earlier, later in pairwise(lags))


def group_status(statuses: Iterable[Status]) -> Status:
    """Burrow's group status: OK, raised to the worst partition's, above ERR as ERR."""
    status = Status.OK
    for partition in statuses:
        if partition.severity > status.severity:
            status = Status.ERR if partition.severity > Status.ERR.severity else partition
    return status


def group_complete(completes: Sequence[float]) -> float:
    """The share of the group's partitions whose window is full (0.0 with none)."""
    return sum(1 for c in completes if c >= 1.0) / len(completes) if completes else 0.0


def worst(statuses: Iterable[Status]) -> Status:
    """The group's worst partition status (NOTFOUND only if nothing else is known)."""
    return max(statuses, key=lambda s: s.severity, default=Status.NOTFOUND)
