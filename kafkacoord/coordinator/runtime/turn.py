"""Group commit across shards: what one processor turn appends completes as one.

In a turn every shard with open records sends its own batch to its own writer, as
before (each partition is appended, acknowledged and fenced on its own). The batches
join one :class:`AppendBarrier`: each batch's outcome is recorded as it arrives, and
only when the last batch of the turn is durable or lost are they all marked finished,
with one wake-up of the processor for every shard. The next turn then folds all of
them into one RocksDB write (:class:`~kafkacoord.storage.cache.CacheBatch`) and
sends every reply together. A shard whose batch failed fails alone: its outcome is
its own, only the moment it is looked at is shared.

:class:`GroupCommits` bounds how many turns' appends are in flight at once (its
processor chooses how many). A turn beyond it still handles its requests and
replays their records (later requests see them), but holds the records back; the
turn after the next append finishes sends everything held, of every shard, as one
group. At low load nothing is in flight and a turn appends at once: no added
wait. A group that stalls (one partition's produce hangs) is released after a
while: its other batches finish, and it no longer holds every shard's next
appends back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from kafkacoord.storage.cache import CacheBatch
from kafkacoord.storage.errors import AppendError

from .writer import Delivered

log = structlog.get_logger(__name__)

# A group of appends in flight this long is released (see GroupCommits): far beyond a
# healthy broker's acks=all round trip, well within a client's request timeout.
STALL_S = 0.5

# Called on whichever thread finishes batches, with each of their waiters once.
Wake = Callable[[list[object]], None]


class _Batch:
    """One batch of a barrier: how to finish it, whom to wake, whether it is in."""

    __slots__ = ("arrived", "finish", "waiter")

    def __init__(self, finish: Callable[[], None], waiter: object) -> None:
        self.finish = finish
        self.waiter = waiter
        self.arrived = False


class AppendBarrier:
    """Counts a turn's batches down; finishes them all once the last one is in.

    The turn holds one count of its own until :meth:`seal`, so batches that finish
    while the turn is still submitting (or inline, as a failed writer does) wait for
    the rest. A barrier whose last batch hangs can be :meth:`released`: the batches
    already in finish at once and the rest finish one by one as they arrive.
    Thread-safe: batches finish on the writers' delivery thread.
    """

    __slots__ = ("_batches", "_complete", "_lock", "_released", "_remaining", "_settled",
                 "_wake", "started")  # fmt: skip

    def __init__(self, wake: Wake, settled: Callable[[AppendBarrier], None] | None = None) -> None:
        self._wake = wake
        self._settled = settled
        self._lock = threading.Lock()
        self._remaining = 1
        self._batches: list[_Batch] = []
        self._complete = False
        self._released = False
        self.started = 0.0  # when the group went in flight (its owner's clock)

    def __bool__(self) -> bool:
        """Whether any batch joined."""
        return bool(self._batches)

    def join(
        self,
        record: Delivered,
        finish: Callable[[], None],
        waiter: object,
    ) -> Delivered:
        """A batch joins the turn: ``record`` takes its outcome when it arrives,
        ``finish`` runs once every batch of the turn is in (once this one is, if the
        group was released), then ``waiter`` is woken."""
        batch = _Batch(finish, waiter)
        with self._lock:
            self._remaining += 1
            self._batches.append(batch)

        def delivered(offsets: list[int], error: AppendError | None) -> None:
            record(offsets, error)
            self._arrive(batch)

        return delivered

    def seal(self) -> None:
        """The turn submitted everything it had."""
        self._arrive(None)

    def release(self) -> bool:
        """Stop waiting for the whole group: finish the batches already in, and every
        later one as it arrives. False if the group completed first."""
        with self._lock:
            if self._complete or self._released:
                return False
            self._released = True
            arrived = [b for b in self._batches if b.arrived]
        self._finish(arrived)
        return True

    def _arrive(self, batch: _Batch | None) -> None:
        with self._lock:
            if batch is not None:
                batch.arrived = True
            self._remaining -= 1
            released = self._released
            if not released:
                if self._remaining:
                    return
                self._complete = True
        if released:  # the group no longer waits for its last batch: this one goes alone
            if batch is not None:
                self._finish([batch])
            return
        if self._settled is not None:
            self._settled(self)
        self._finish(self._batches)

    def _finish(self, batches: list[_Batch]) -> None:
        waiters: list[object] = []
        for batch in batches:
            batch.finish()
            if batch.waiter not in waiters:
                waiters.append(batch.waiter)
        if waiters:
            self._wake(waiters)


@dataclass(slots=True)
class Turn:
    """What the shards stepped in one processor turn share."""

    appends: AppendBarrier
    may_append: bool = True  # False: hold new records back, an earlier group is in flight
    cache: CacheBatch = field(default_factory=CacheBatch)
    held: list[object] = field(default_factory=list)  # hosts that held records back

    # Written out: mypyc compiles it, where the dataclass's generated one is interpreted.
    def __init__(self, appends: AppendBarrier, may_append: bool = True) -> None:
        self.appends = appends
        self.may_append = may_append
        self.cache = CacheBatch()
        self.held = []

    def hold(self, host: object) -> None:
        """``host`` has records to append once the turn may append again."""
        self.held.append(host)


class GroupCommits:
    """One processor's turns: at most ``max_inflight`` of them with appends in flight.

    A group in flight longer than ``stall_s`` is released (:meth:`AppendBarrier.release`)
    and no longer counts: one partition whose appends hang (an ``acks=all`` produce
    waiting out a dead follower) then holds back only its own shard's replies, not
    those of every shard in its groups, nor, once the groups in flight are all its
    own, every shard's next appends.

    Only the processor's thread calls :meth:`begin`, :meth:`end` and :meth:`wait_s`;
    appends finish on the writers' thread.
    """

    def __init__(
        self,
        wake: Wake,
        *,
        max_inflight: int = 4,
        stall_s: float = STALL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_inflight < 1:
            raise ValueError("max_inflight must be at least 1")
        self._wake = wake
        self._max_inflight = max_inflight
        self._stall_s = stall_s
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: list[AppendBarrier] = []  # in flight, oldest first
        self._held: dict[int, object] = {}
        self.released = 0  # groups released for stalling

    @property
    def inflight(self) -> int:
        return len(self._groups)

    @property
    def saturated(self) -> bool:
        """A turn now would have to hold its records back."""
        return len(self._groups) >= self._max_inflight

    def wait_s(self) -> float | None:
        """How long until the oldest group in flight counts as stalled; None if none is."""
        with self._lock:
            if not self._groups:
                return None
            started = self._groups[0].started
        return max(0.0, started + self._stall_s - self._clock())

    def begin(self) -> tuple[Turn, list[object]]:
        """A new turn, and the hosts that held records back if it may append them."""
        self._release_stalled()
        with self._lock:
            may_append = len(self._groups) < self._max_inflight
        turn = Turn(AppendBarrier(self._wake, self._finished), may_append)
        if not may_append or not self._held:
            return turn, []
        held, self._held = list(self._held.values()), {}
        return turn, held

    def end(self, turn: Turn) -> None:
        """The turn submitted what it had: count its appends in flight, then seal them."""
        for host in turn.held:
            self._held[id(host)] = host
        if turn.appends:
            turn.appends.started = self._clock()
            with self._lock:
                self._groups.append(turn.appends)
        turn.appends.seal()

    def _release_stalled(self) -> None:
        now = self._clock()
        while True:
            with self._lock:
                if not self._groups:
                    return
                oldest = self._groups[0]
                if now - oldest.started < self._stall_s:
                    return
                self._groups.pop(0)
            if oldest.release():
                self.released += 1
                log.warning("a group of appends is stalled; its shards' other batches go on",
                            waited_s=round(now - oldest.started, 3))  # fmt: skip

    def _finished(self, group: AppendBarrier) -> None:
        with self._lock:
            if group in self._groups:
                self._groups.remove(group)


__all__ = ["STALL_S", "AppendBarrier", "GroupCommits", "Turn", "Wake"]
