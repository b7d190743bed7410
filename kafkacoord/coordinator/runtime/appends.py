"""The append pipeline of one shard host: group commit, then write, then answer.

What the handlers of a step produced (records already replayed into the shard) is
sent to the shard's writer as one batch while the next steps go on; up to
``max_inflight`` batches are in flight. Batches finish in order, and each durable one
is folded into the RocksDB cache with its checkpoint before its post-commit actions
run and its replies are released. While the pipeline is full, steps keep adding to the
next batch. Within a processor's :class:`~.turn.Turn` a batch joins the turn's append
barrier and durable batches are staged into the turn's one cache write.

A batch holds at most what one record batch the broker takes can (:data:`MAX_BATCH_BYTES`):
the handled results of many steps are cut into batches at a result's edge, so that no
result is split and none is refused for the company it came in.

A failed append loses its batch and every one after it: their replies are answered
with the host's ``unavailable`` error and the shard must be reloaded
(:attr:`AppendPipeline.reload_needed`); a fenced writer is raised, as the host stops.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from kafkacoord.codecs.batch_size import MAX_RECORDS_BYTES
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.storage.cache import Change
from kafkacoord.storage.errors import AppendError

from .host_parts import HostParts, HostStats
from .observer import HostObserver
from .reply_cache import ReplyCache
from .shard import RawRecord, Reply, ReplySink, Result, encoded_bytes, raw_records
from .turn import Turn
from .writer import ShardWriter, WriterFencedError

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _Pending:
    """One append in the pipeline and the replies waiting for it."""

    result: Result
    submitted: float
    raw: list[RawRecord] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    error: AppendError | None = None
    done: bool = False

    # Written out: mypyc compiles it, where the dataclass's generated one is interpreted.
    def __init__(self, result: Result, submitted: float) -> None:
        self.result = result
        self.submitted = submitted
        self.raw = []
        self.offsets = []
        self.error = None
        self.done = False

    def record(self, offsets: list[int], error: AppendError | None) -> None:
        """The append's outcome (from the writer's thread); ``done`` is set by whoever
        decides when it is looked at."""
        self.offsets, self.error = offsets, error


def refusals(replies: Sequence[Reply], error: ErrorCode) -> list[Reply]:
    """``error`` in place of each of ``replies``."""
    return [Reply(r.to, r.api, error) for r in replies]


class AppendPipeline:
    """One host's appends in flight, oldest first, and what is handled but not yet sent."""

    def __init__(
        self,
        name: str,
        parts: HostParts,
        *,
        owner: object,
        replies: ReplySink,
        answered: ReplyCache,
        stats: HostStats,
        observer: HostObserver,
        clock_ms: Callable[[], int],
        unavailable: ErrorCode,
        max_inflight: int,
    ) -> None:
        self.name = name
        # Opened by each load (the fence comes first), closed when the shard goes.
        self.writer: ShardWriter | None = None
        # Set when an append failed: the shard must be loaded again before it appends.
        self.reload_needed = False
        # The host: the processor steps it when held records may go, wakes it when they are in.
        self._owner = owner
        self._parts = parts
        self._replies = replies
        self._answered = answered
        self._stats = stats
        self._observer = observer
        self._clock_ms = clock_ms
        self._unavailable = unavailable
        self._max_inflight = max_inflight
        self._open = Result()  # handled, replayed, not yet sent to the writer
        self._open_bytes = 0  # the most the open batch's records take in a record batch
        self._sealed: deque[Result] = deque()  # full batches waiting to be sent, oldest first
        self._inflight: deque[_Pending] = deque()
        self._wake = threading.Event()  # an append finished: for flush()

    @property
    def unanswered(self) -> bool:
        """Whether anything handled is not answered yet."""
        return bool(self._open or self._sealed or self._inflight)

    def add(self, result: Result) -> None:
        """A handled (and replayed) result: it goes out with the next batch, or starts
        one of its own if the open batch has no room for its records."""
        size = 0
        if result.records:
            size = encoded_bytes(result.records)  # encoded as they were replayed
            if self._open.records and self._open_bytes + size > MAX_RECORDS_BYTES:
                self._sealed.append(self._open)
                self._open, self._open_bytes = Result(), 0
        self._open.extend(result)
        self._open_bytes += size

    def pump(self, turn: Turn | None = None) -> None:
        """Answer what finished, send what is open (a writer may finish it at once), again."""
        self._release(turn)
        self._submit_open(turn)
        self._release(turn)

    def flush(self, timeout_s: float) -> None:
        """Append everything handled so far and wait until it is answered (a load's
        activation, off any processor: each batch is stored on its own)."""
        deadline = time.monotonic() + timeout_s
        while self.unanswered:
            self._wake.clear()
            self.pump()
            if not self.unanswered:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AppendError(
                    f"{self.name}: appends not acknowledged in {timeout_s}s", retriable=True
                )
            self._wake.wait(min(remaining, 0.5))

    def drop(self) -> list[Reply]:
        """Forget every append not answered yet (they may still land): their replies."""
        replies = [r for p in self._inflight for r in p.result.replies]
        replies += [r for sealed in self._sealed for r in sealed.replies] + self._open.replies
        self._inflight.clear()
        self._sealed.clear()
        self._open, self._open_bytes = Result(), 0
        return replies

    def close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def _submit_open(self, turn: Turn | None) -> None:
        """Send what the handlers produced since the last append, batch by batch, while
        the pipeline has room.

        A step with only replies still queues behind the appends before it: its
        replies may read state those appends have not made durable yet.
        """
        while (self._sealed or self._open) and len(self._inflight) < self._max_inflight:
            result = self._sealed[0] if self._sealed else self._open
            if turn is not None and not turn.may_append and result.records:
                turn.hold(self._owner)  # an earlier group is in flight: these join the next one
                return
            if self._sealed:
                self._sealed.popleft()
            else:
                self._open, self._open_bytes = Result(), 0
            self._submit(result, turn)

    def _submit(self, result: Result, turn: Turn | None) -> None:
        pending = _Pending(result, time.monotonic())
        self._inflight.append(pending)
        if not result.records:
            pending.done = True
            return
        assert self.writer is not None
        pending.raw = raw_records(result.records)  # encoded when they were replayed
        if turn is None:
            self.writer.submit(pending.raw, functools.partial(self._delivered, pending))
        else:
            done = turn.appends.join(
                functools.partial(_Pending.record, pending),
                functools.partial(self._finished, pending),
                self._owner,
            )  # fmt: skip
            self.writer.submit(pending.raw, done)

    def _delivered(self, pending: _Pending, offsets: list[int], error: AppendError | None) -> None:
        """From the writer's thread (or inline), off any turn: mark done, wake flush()."""
        pending.record(offsets, error)
        pending.done = True
        self._woken()

    def _finished(self, pending: _Pending) -> None:
        """Every batch of the turn ``pending`` joined is in; the barrier wakes the processor."""
        pending.done = True
        self._woken()

    def _woken(self) -> None:
        """Wake flush(), if it may wait. Event.set takes a lock on every call; a set flag
        needs nothing, because flush() clears it before it looks at what is done."""
        if not self._wake.is_set():
            self._wake.set()

    def _release(self, turn: Turn | None) -> None:
        """Store and answer finished appends, oldest first (write, then answer)."""
        durable: list[_Pending] = []
        failed: AppendError | None = None
        while self._inflight and self._inflight[0].done:
            failed = self._inflight[0].error
            if failed is not None:
                break
            durable.append(self._inflight.popleft())
        if durable:
            self._store([p for p in durable if p.result.records], turn)
            replies = [r for p in durable for r in p.result.committed()]
            self._answered.released(replies)
            self._replies.send(replies)
        if failed is not None:
            self._failed(failed, turn)

    def _failed(self, error: AppendError, turn: Turn | None) -> None:
        """An append failed: it and everything after it is unanswered; the shard reloads."""
        if turn is not None:
            turn.cache.write()  # the reload reads the cache: what is durable goes in first
        self._replies.send(refusals(self.drop(), self._unavailable))
        if isinstance(error, WriterFencedError):
            raise error
        log.warning("append failed; reloading shard", shard=self.name, error=str(error))
        self._observer.restarted(self.name, "append_failed")
        self.close_writer()
        self.reload_needed = True

    def _store(self, durable: list[_Pending], turn: Turn | None) -> None:
        """Fold durable batches into the cache with the checkpoint after the last one,
        in one write (or into the turn's write, shared with the other shards)."""
        if not durable:
            return
        changes: dict[bytes, Change] = {}
        expiry = self._parts.policy.expiry
        next_offset = 0
        for pending in durable:
            for record, (key, value), offset in zip(
                pending.result.records, pending.raw, pending.offsets, strict=True
            ):
                if value is None or record.value is None:
                    changes[key] = Change(None)
                else:
                    changes[key] = Change(value, expiry(record.key, record.value), offset)
            next_offset = max(next_offset, max(pending.offsets) + 1)
        store, identity, now = self._parts.store, self._parts.identity, self._clock_ms()
        if turn is None:
            store.apply(changes, next_offset=next_offset, identity=identity, now_ms=now)
        else:
            store.stage(turn.cache, changes, next_offset=next_offset, identity=identity,
                        now_ms=now)  # fmt: skip
        finished = time.monotonic()
        for pending in durable:
            self._stats.batches += 1
            self._stats.records_written += len(pending.raw)
            self._observer.appended(self.name, len(pending.raw), finished - pending.submitted)


__all__ = ["AppendPipeline", "refusals"]
