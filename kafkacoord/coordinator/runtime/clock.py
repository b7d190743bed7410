"""The shards' clock: wall time that advances only as the monotonic clock does.

Every timer of a shard (member and node sessions, join and sync deadlines, offset expiry)
is a deadline on the clock its host reads, and records carry that clock's time. On the
wall clock a step (NTP, an operator, a VM resumed) would fire every timer at once when
it jumps forward, fencing each member and node, or hold every timer back by the step
when it jumps back. This clock reads the wall once per process and then follows the
monotonic clock, as Kafka's coordinator timers do (``hiResClockMs``), so no step moves a
deadline. Its time parts from the wall by the sum of the steps since the process began.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SteadyClock:
    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._monotonic = monotonic
        self._offset_s = wall() - monotonic()

    def ms(self) -> int:
        return int((self._offset_s + self._monotonic()) * 1000)


# A bound method, not a function calling one: hosts read it several times a step.
steady_ms: Callable[[], int] = SteadyClock().ms
"""Milliseconds of the process's steady clock (one anchor: every shard agrees)."""
