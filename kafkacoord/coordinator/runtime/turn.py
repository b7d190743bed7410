"""Group commit across shards: what one processor turn appends completes as one.

In a turn every shard with open records sends its own batch to its own writer, as
before (each partition is appended, acknowledged and fenced on its own). The batches
join one :class:`AppendBarrier`: each batch's outcome is recorded as it arrives, and
only when the last batch of the turn is durable or lost are they all marked finished,
with one wake-up of the processor for every shard. The next turn then folds all of
them into one RocksDB write (:class:`~kafkacoord.storage.cache.CacheBatch`) and
sends every reply together. A shard whose batch failed fails alone: its outcome is
its own, only the moment it is looked at is shared.

:class:`GroupCommits` bounds how many turns' appends are in flight at once (four by
default). A turn beyond it still handles its requests and replays their records
(later requests see them), but holds the records back; the turn after the next
append finishes sends everything held, of every shard, as one group. At low load
nothing is in flight and a turn appends at once: no added wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkacoord.storage.cache import CacheBatch
from kafkacoord.storage.errors import AppendError

from .writer import Delivered

# Called once, on whichever thread finishes the barrier, with every waiter that joined.
Wake = Callable[[list[object]], None]


class AppendBarrier:
    """Counts a turn's batches down; finishes them all once the last one is in.

    The turn holds one count of its own until :meth:`seal`, so batches that finish
    while the turn is still submitting (or inline, as a failed writer does) wait for
    the rest. Thread-safe: batches finish on the writers' delivery thread.
    """

    __slots__ = ("_finishers", "_lock", "_remaining", "_waiters", "_wake")

    def __init__(self, wake: Wake) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._remaining = 1
        self._finishers: list[Callable[[], None]] = []
        self._waiters: list[object] = []

    def __bool__(self) -> bool:
        """Whether any batch joined."""
        return bool(self._finishers)

    def join(
        self,
        record: Delivered,
        finish: Callable[[], None],
        waiter: object,
    ) -> Delivered:
        """A batch joins the turn: ``record`` takes its outcome when it arrives,
        ``finish`` runs once every batch of the turn is in, then ``waiter`` is woken."""
        with self._lock:
            self._remaining += 1
            self._finishers.append(finish)
            if waiter not in self._waiters:
                self._waiters.append(waiter)

        def delivered(offsets: list[int], error: AppendError | None) -> None:
            record(offsets, error)
            self._arrive()

        return delivered

    def seal(self) -> None:
        """The turn submitted everything it had."""
        self._arrive()

    def _arrive(self) -> None:
        with self._lock:
            self._remaining -= 1
            if self._remaining:
                return
        for finish in self._finishers:
            finish()
        if self._waiters:
            self._wake(self._waiters)


@dataclass(slots=True)
class Turn:
    """What the shards stepped in one processor turn share."""

    appends: AppendBarrier
    may_append: bool = True  # False: hold new records back, an earlier group is in flight
    cache: CacheBatch = field(default_factory=CacheBatch)
    held: list[object] = field(default_factory=list)  # hosts that held records back

    def hold(self, host: object) -> None:
        """``host`` has records to append once the turn may append again."""
        self.held.append(host)


class GroupCommits:
    """One processor's turns: at most ``max_inflight`` of them with appends in flight.

    Only the processor's thread calls :meth:`begin` and :meth:`end`; appends finish
    on the writers' thread.
    """

    def __init__(self, wake: Wake, *, max_inflight: int = 4) -> None:
        if max_inflight < 1:
            raise ValueError("max_inflight must be at least 1")
        self._wake = wake
        self._max_inflight = max_inflight
        self._lock = threading.Lock()
        self._inflight = 0
        self._held: dict[int, object] = {}

    @property
    def inflight(self) -> int:
        return self._inflight

    @property
    def saturated(self) -> bool:
        """A turn now would have to hold its records back."""
        return self._inflight >= self._max_inflight

    def begin(self) -> tuple[Turn, list[object]]:
        """A new turn, and the hosts that held records back if it may append them."""
        with self._lock:
            may_append = self._inflight < self._max_inflight
        turn = Turn(AppendBarrier(self._finished), may_append)
        if not may_append or not self._held:
            return turn, []
        held, self._held = list(self._held.values()), {}
        return turn, held

    def end(self, turn: Turn) -> None:
        """The turn submitted what it had: count its appends in flight, then seal them."""
        for host in turn.held:
            self._held[id(host)] = host
        if turn.appends:
            with self._lock:
                self._inflight += 1
        turn.appends.seal()

    def _finished(self, waiters: list[object]) -> None:
        with self._lock:
            self._inflight -= 1
        self._wake(waiters)


__all__ = ["AppendBarrier", "GroupCommits", "Turn", "Wake"]
