"""Runs one shard: load, then handle requests and timers on one thread.

Per loop turn the host drains its queue, runs each handler, replays the returned
records into the shard at once (later handlers see them), appends the batch
durably, folds it into the RocksDB cache, and only then sends the replies
(write, then answer; one append per turn is the group commit). A failed append
discards the shard and rebuilds it from the cache and the log; a fenced writer
stops the host for good.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from kafkacoord.codecs import CodecError, decode_record, encode_record
from kafkacoord.codecs.models import ControllerValue
from kafkacoord.storage.cache import Change, ShardStore
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.fold import FoldPolicy
from kafkacoord.storage.recovery import ShardLoad

from ..protocol import ErrorCode, ProtocolError
from ..transport.replies import ReplySender
from .observer import HostObserver, NullObserver
from .shard import Record, Reply, Request, Result, Shard
from .writer import ShardWriter, WriterFencedError

log = structlog.get_logger(__name__)


class HostState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    STOPPED = "stopped"


@dataclass(slots=True)
class HostStats:
    loads: int = 0
    load_seconds: float = 0.0
    records_loaded: int = 0
    batches: int = 0
    records_written: int = 0
    requests: int = 0
    errors: dict[str, int] = field(default_factory=dict)


_STOP = object()


@dataclass(frozen=True, slots=True)
class HostParts:
    """The I/O a host needs, built by its owner."""

    store: ShardStore
    identity: str
    policy: FoldPolicy
    recover: Callable[[], ShardLoad]
    make_shard: Callable[[], Shard]
    make_writer: Callable[[], ShardWriter]
    replies: ReplySender


def replay_order(record: Record) -> int:
    """Cache contents replay in controller-epoch order, so epoch fencing keeps them all."""
    value = record.value
    if isinstance(value, ControllerValue):
        return value.epoch
    return int(getattr(value, "controller_epoch", -1))


class ShardHost:
    def __init__(
        self,
        name: str,
        parts: HostParts,
        *,
        unavailable: ErrorCode = ErrorCode.NOT_COORDINATOR,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        max_batch: int = 2000,
        dedupe_entries: int = 10_000,
        on_stopped: Callable[[ShardHost, Exception | None], None] | None = None,
        observer: HostObserver | None = None,
    ) -> None:
        self.name = name
        self.parts = parts
        self.unavailable = unavailable
        self.state = HostState.LOADING
        self.stats = HostStats()
        self.shard: Shard | None = None
        self._clock_ms = clock_ms
        self._max_batch = max_batch
        self._dedupe: OrderedDict[tuple[str, int], Reply] = OrderedDict()
        self._dedupe_entries = dedupe_entries
        self._on_stopped = on_stopped
        self._observer: HostObserver = observer or NullObserver()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._active = threading.Event()
        self._writer: ShardWriter | None = None
        self._thread = threading.Thread(target=self._run, name=f"shard-{name}", daemon=True)

    # -- owner API ---------------------------------------------------------------

    def start(self) -> ShardHost:
        self._thread.start()
        return self

    def submit(self, request: Request) -> None:
        if self.state is HostState.LOADING:
            self.parts.replies.send(
                [Reply(request.ref, request.api, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
            )
        elif self.state is HostState.STOPPED:
            self.parts.replies.send([Reply(request.ref, request.api, self.unavailable)])
        else:
            self._queue.put(request)

    def call_soon(self, fn: Callable[[Shard, int], Result]) -> None:
        """Run ``fn`` on the shard's thread as if it were a handler (tests, admin hooks)."""
        self._queue.put(fn)

    def wait_active(self, timeout_s: float) -> bool:
        return self._active.wait(timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._queue.put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    # -- the shard's thread --------------------------------------------------------

    def _run(self) -> None:
        failure: Exception | None = None
        try:
            self._writer = self.parts.make_writer()
            self._load()
            while self._turn():
                pass
        except WriterFencedError as exc:
            failure = exc
            log.error("shard writer fenced; stepping down", shard=self.name, error=str(exc))
        except Exception as exc:
            failure = exc
            log.exception("shard host failed", shard=self.name)
        finally:
            self._shutdown()
            if self._on_stopped is not None:
                self._on_stopped(self, failure)

    def _load(self) -> None:
        started = time.monotonic()
        self.state = HostState.LOADING
        self._active.clear()
        load = self.parts.recover()
        shard = self.parts.make_shard()
        records: list[Record] = []
        for raw_key, raw_value in self.parts.store.items():
            try:
                key, value = decode_record(raw_key, raw_value)
            except CodecError as exc:  # the cache holds only values that decoded once
                log.warning("undecodable cached record", shard=self.name, error=str(exc))
                continue
            records.append(Record(key, value))
        if self.parts.policy.fenced_by_controller_epoch:
            records.sort(key=replay_order)
        for record in records:
            shard.replay(record)
        self.shard = shard
        self.stats.loads += 1
        self.stats.records_loaded = len(records)
        self._commit(self._apply(shard.on_loaded(self._clock_ms())))
        self.stats.load_seconds = time.monotonic() - started
        self.state = HostState.ACTIVE
        self._active.set()
        self._observer.loaded(self.name, self.stats.load_seconds, len(records))
        log.info("shard active", shard=self.name, keys=len(records), log_records=load.stats.records,
                 rebuilt=load.rebuilt, seconds=round(self.stats.load_seconds, 3))  # fmt: skip

    def _apply(self, result: Result) -> Result:
        assert self.shard is not None
        for record in result.records:
            self.shard.replay(record)
        return result

    def _turn(self) -> bool:
        """One loop turn; False once stopped."""
        assert self.shard is not None
        deadline = self.shard.next_deadline_ms()
        wait_s = 0.5 if deadline is None else max(0.0, (deadline - self._clock_ms()) / 1000)
        try:
            first = self._queue.get(timeout=min(wait_s, 0.5))
        except queue.Empty:
            first = None
        events = [] if first is None else [first]
        while len(events) < self._max_batch:
            try:
                events.append(self._queue.get_nowait())
            except queue.Empty:
                break
        batch = Result()
        now = self._clock_ms()
        stopping = False
        for event in events:
            if event is _STOP:
                stopping = True
                break
            batch.extend(self._handle(event, now))
        batch.extend(self._apply(self.shard.fire_timers(self._clock_ms())))
        self._commit(batch)
        return not stopping

    def _handle(self, event: object, now: int) -> Result:
        assert self.shard is not None
        if not isinstance(event, Request):
            fn: Callable[[Shard, int], Result] = event  # type: ignore[assignment]
            return self._apply(fn(self.shard, now))
        self.stats.requests += 1
        cached = self._dedupe.get((event.ref.client_id, event.ref.correlation_id))
        if cached is not None:
            return Result(replies=[cached])
        try:
            result = self.shard.handle(event, now)
        except ProtocolError as exc:
            return Result(replies=[Reply(event.ref, event.api, exc.code, None, exc.message)])
        except Exception as exc:
            log.exception("handler failed", shard=self.name, api=event.api)
            return Result(
                replies=[
                    Reply(event.ref, event.api, ErrorCode.UNKNOWN_SERVER_ERROR, None, str(exc))
                ]
            )
        return self._apply(result)

    def _commit(self, batch: Result) -> None:
        """Append the batch's records, fold them into the cache, then send its replies."""
        if batch.records:
            try:
                self._append(batch.records)
            except WriterFencedError:
                self.parts.replies.send(self._unavailable(batch.replies))
                raise
            except AppendError as exc:
                log.warning("append failed; reloading shard", shard=self.name, error=str(exc))
                self.parts.replies.send(self._unavailable(batch.replies))
                self._load()
                return
        self._remember(batch.replies)
        self.parts.replies.send(batch.replies)

    def _append(self, records: list[Record]) -> None:
        assert self._writer is not None
        raw = [encode_record(r.key, r.value) for r in records]
        started = time.monotonic()
        offsets = self._writer.write(raw)
        self._observer.appended(self.name, len(records), time.monotonic() - started)
        changes: dict[bytes, Change] = {}
        policy = self.parts.policy
        for record, (key, value) in zip(records, raw, strict=True):
            if value is None or record.value is None:
                changes[key] = Change(None)
            else:
                changes[key] = Change(value, policy.expiry(record.key, record.value))
        self.parts.store.apply(
            changes, next_offset=max(offsets) + 1, identity=self.parts.identity,
            now_ms=self._clock_ms(),
        )  # fmt: skip
        self.stats.batches += 1
        self.stats.records_written += len(records)

    def _unavailable(self, replies: list[Reply]) -> list[Reply]:
        return [Reply(r.to, r.api, self.unavailable) for r in replies]

    def _remember(self, replies: list[Reply]) -> None:
        for reply in replies:
            self._observer.answered(self.name, reply.api, reply.error)
            if reply.error is not ErrorCode.NONE:
                self.stats.errors[reply.error.name] = self.stats.errors.get(reply.error.name, 0) + 1
            if reply.error.retriable:
                continue
            self._dedupe[(reply.to.client_id, reply.to.correlation_id)] = reply
            if len(self._dedupe) > self._dedupe_entries:
                self._dedupe.popitem(last=False)

    def _shutdown(self) -> None:
        self.state = HostState.STOPPED
        self._active.clear()
        parked: list[Reply] = []
        if self.shard is not None:
            parked = self.shard.on_unloaded()
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, Request):
                parked.append(Reply(event.ref, event.api, self.unavailable))
        self.parts.replies.send(self._unavailable(parked))
        if self._writer is not None:
            self._writer.close()
        log.info("shard stopped", shard=self.name)


__all__ = ["HostParts", "HostState", "ShardHost"]
