"""When to start a stopped shard host again: soon, then less often if it keeps stopping.

A host that stops for a reason other than losing its shard (a bug, a broker that
failed its load) is started again by its owner. The first restart comes at once
(well within two seconds); each one after a short life waits twice as long as the
last, up to a cap, so a shard that cannot load does not spin. A host that served for
a while starts over from the shortest delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .timers import doubling

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0
HEALTHY_S = 60.0


class RestartBackoff:
    """The delay before each restart of one host. Not thread-safe: one owner per host."""

    def __init__(
        self,
        *,
        first_s: float = FIRST_DELAY_S,
        max_s: float = MAX_DELAY_S,
        healthy_s: float = HEALTHY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._first_s = first_s
        self._max_s = max_s
        self._healthy_s = healthy_s
        self._clock = clock
        self._restarts = 0
        self._started = clock()

    def started(self) -> None:
        """A host (re)started now."""
        self._started = self._clock()

    def next_delay_s(self) -> float:
        """The host stopped: how long to wait before starting it again."""
        if self._clock() - self._started >= self._healthy_s:
            self._restarts = 0
        delay = doubling(self._first_s, self._restarts, self._max_s)
        self._restarts += 1
        return delay
