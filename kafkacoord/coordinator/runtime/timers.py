"""Keyed timers for a shard: schedule, reschedule, cancel, pop what is due.

Pure and clock-free: the shard passes ``now_ms`` in, so tests drive time by hand.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Hashable


class Timers:
    """Deadlines by key; the earliest is popped first, and rescheduling replaces."""

    def __init__(self) -> None:
        self._deadlines: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0  # tie-breaker: keys need not be orderable

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        """(Re)schedule ``key``; a later schedule replaces an earlier one."""
        self._deadlines[key] = deadline_ms
        self._seq += 1
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._deadlines.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadlines

    def __len__(self) -> int:
        return len(self._deadlines)

    def clear(self) -> None:
        self._deadlines.clear()
        self._heap.clear()

    def snapshot(self) -> dict[Hashable, int]:
        return dict(self._deadlines)

    def restore(self, snapshot: dict[Hashable, int]) -> None:
        """Back to ``snapshot``: what was scheduled, cancelled or popped since is undone."""
        self._deadlines = dict(snapshot)
        self._heap = []
        for key, deadline in self._deadlines.items():
            self._seq += 1
            self._heap.append((deadline, self._seq, key))
        heapq.heapify(self._heap)

    def _prune(self) -> None:
        # Drop heap entries that were cancelled or superseded by a reschedule.
        while self._heap:
            deadline, _, key = self._heap[0]
            if self._deadlines.get(key) == deadline:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[Hashable]:
        """Keys whose deadline is at or before ``now_ms``, earliest first; they are removed."""
        due: list[Hashable] = []
        while True:
            self._prune()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            due.append(key)


log = logging.getLogger(__name__)

# A failed timer is tried again after a backoff that doubles, as Kafka's runtime
# reschedules a timer whose operation threw; one that fails this often is dropped, so a
# shard is never stuck retrying one input for ever.
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 10_000
RETRY_ATTEMPTS = 5


def doubling(first: float, attempt: int, cap: float) -> float:
    """The wait before retry ``attempt`` (0 for the first): ``first``, doubled each time,
    at most ``cap``. Timers, internal events and restarts all back off this way."""
    return min(first * (1 << min(attempt, 30)), cap)


class TimerRetries:
    """How often each timer key has failed in a row, and when to try it again."""

    def __init__(
        self,
        *,
        backoff_ms: int = RETRY_BACKOFF_MS,
        backoff_max_ms: int = RETRY_BACKOFF_MAX_MS,
        attempts: int = RETRY_ATTEMPTS,
    ) -> None:
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._attempts = attempts
        self._failures: dict[Hashable, int] = {}

    def failed(self, key: Hashable, now_ms: int) -> int | None:
        """The deadline to try ``key`` again at, or None once it has failed too often (it
        is then forgotten: dropped)."""
        count = self._failures.get(key, 0) + 1
        if count >= self._attempts:
            self._failures.pop(key, None)
            return None
        self._failures[key] = count
        return now_ms + int(doubling(self._backoff_ms, count - 1, self._backoff_max_ms))

    def retry_or_drop(
        self,
        schedule: Callable[[Hashable, int], None],
        key: Hashable,
        now_ms: int,
        exc: Exception,
        owner: str,
    ) -> None:
        """``key`` failed: schedule it again after its backoff, or drop it; logged either way."""
        retry_at = self.failed(key, now_ms)
        error = f"{type(exc).__name__}: {exc}"
        if retry_at is None:
            log.error("%s timer %r failed again; dropped (%s)", owner, key, error, exc_info=exc)
            return
        schedule(key, retry_at)
        log.error("%s timer %r failed; retrying in %d ms (%s)", owner, key, retry_at - now_ms,
                  error, exc_info=exc)  # fmt: skip

    def succeeded(self, key: Hashable) -> None:
        if self._failures:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def clear(self) -> None:
        self._failures.clear()
