"""Runs one shard: load it on a thread of its own, then handle its requests and timers
in steps driven by a processor.

In each step the host runs the handler of each event and replays the returned
records into the shard at once (later handlers see them). What a step produced is
sent to the writer as one batch (the group commit) while the next steps go on;
batches finish in order, and each is folded into the RocksDB cache before its
replies are released (write, then answer). While the pipeline is full, steps keep
adding to the next batch. A failed append discards the shard and rebuilds it from
the cache and the log, on a thread of its own; a fenced writer stops the host for
good.

A host steps within a :class:`~.turn.Turn` shared with the other shards its
processor drives: its batch joins the turn's append barrier (the batches of all
shards finish together, with one wake-up) and its durable batches are folded into
the turn's one cache write. The outcome of each batch stays its own shard's.
"""

from __future__ import annotations

import enum
import functools
import heapq
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

import structlog

from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.fencing import controller_epoch_of
from kafkacoord.codecs.models import AvroModel
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.gc_pause import freeze_long_lived, gc_paused, thaw
from kafkacoord.storage.cache import Change, ShardStore, new_change
from kafkacoord.storage.errors import AppendError, LoadCancelledError, PoisonRecordError
from kafkacoord.storage.fold import FoldPolicy
from kafkacoord.storage.recovery import ShardLoad

from .clock import steady_ms
from .driven import ATTACH, WAKE, Processor
from .observer import HostObserver, NullObserver
from .shard import (
    ChannelReplies,
    RawRecord,
    Record,
    Reply,
    ReplySink,
    Request,
    Result,
    Shard,
    encode_records,
    new_record,
    raw_records,
    replay_result,
)
from .timers import doubling
from .turn import Turn
from .writer import ShardWriter, WriterFencedError

log = structlog.get_logger(__name__)


class HostState(enum.Enum):
    """LOADING answers COORDINATOR_LOAD_IN_PROGRESS; STOPPED answers ``unavailable``."""

    LOADING = "loading"
    ACTIVE = "active"
    STOPPED = "stopped"


@dataclass(slots=True)
class HostStats:
    """Counters of one host, for metrics and tests."""

    loads: int = 0
    load_seconds: float = 0.0
    # The last load's seconds by phase: the recovery's (read, fold, cache; standby_wait for
    # a controller taking over a standby's tail), then order, replay, activate.
    load_phases: dict[str, float] = field(default_factory=dict)
    records_loaded: int = 0
    # Log records the last load read: a takeover from a standby's tail reads only the tail.
    log_records_read: int = 0
    batches: int = 0
    records_written: int = 0
    requests: int = 0
    errors: dict[str, int] = field(default_factory=dict)


_STOP: Final = object()  # stop once what was handled is answered

# An internal event that throws is tried again after a backoff that doubles, as
# Kafka's runtime retries a failed event; one that fails this often is dropped.
EVENT_BACKOFF_MS = 100
EVENT_BACKOFF_MAX_MS = 5_000
EVENT_ATTEMPTS = 5


class ReplayError(Exception):
    """Replaying a result threw: the shard may be half-changed and must be reloaded."""


@dataclass(frozen=True, slots=True)
class _Retry:
    """An internal event queued again after it failed ``attempt`` times."""

    fn: Callable[[Shard, int], Result]
    attempt: int


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", type(fn).__name__)


def _server_error(request: Request, exc: BaseException) -> Reply:
    message = f"{type(exc).__name__}: {exc}"
    return Reply(request.ref, request.api, ErrorCode.UNKNOWN_SERVER_ERROR, None,
                 message if len(message) <= 300 else message[:297] + "...")  # fmt: skip


@dataclass(slots=True)
class _Pending:
    """One append in the pipeline and the replies waiting for it."""

    result: Result
    submitted: float
    raw: list[RawRecord] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    error: AppendError | None = None
    done: bool = False

    def record(self, offsets: list[int], error: AppendError | None) -> None:
        """The append's outcome (from the writer's thread); ``done`` is set by whoever
        decides when it is looked at."""
        self.offsets, self.error = offsets, error


@dataclass(frozen=True, slots=True)
class HostParts:
    """The I/O a host needs, built by its owner."""

    store: ShardStore
    identity: str
    policy: FoldPolicy
    recover: Callable[[], ShardLoad]
    make_shard: Callable[[], Shard]
    make_writer: Callable[[], ShardWriter]
    replies: ReplySink = field(default_factory=ChannelReplies)


def replay_order(record: Record) -> int:
    """Cache contents replay in controller-epoch order, so epoch fencing keeps them all."""
    return controller_epoch_of(record.value)


def _in_log_order(decoded: dict[bytes, tuple[AvroModel, AvroModel]]) -> list[Record]:
    """Decoded records as an in-order fold keeps them (the log order of each key's last
    record): the fence admits them all in this order, so they need no sorting."""
    return [new_record(key, value) for key, value in decoded.values()]


def _by_record_type(decoded: dict[bytes, tuple[AvroModel, AvroModel]]) -> list[Record]:
    """Decoded records in the cache's order of record types (the type tag leads every key),
    as a replay of the cache would see them; within a type, in log order."""
    by_type: dict[int, list[Record]] = {}
    for raw_key, (key, value) in decoded.items():
        by_type.setdefault(raw_key[0], []).append(Record(key, value))
    return [record for tag in sorted(by_type) for record in by_type[tag]]


class ShardHost:
    """Runs one shard: loads it, then handles its requests and timers in steps driven by
    its processor, with group commit and write-then-answer (see the module docstring)."""

    def __init__(
        self,
        name: str,
        parts: HostParts,
        *,
        processor: Processor,
        unavailable: ErrorCode = ErrorCode.NOT_COORDINATOR,
        clock_ms: Callable[[], int] = steady_ms,
        max_inflight: int = 4,
        flush_timeout_s: float = 60.0,
        dedupe_entries: int = 10_000,
        on_stopped: Callable[[ShardHost, Exception | None], None] | None = None,
        observer: HostObserver | None = None,
        on_active: Callable[[ShardHost], None] | None = None,
    ) -> None:
        self.name = name
        self.parts = parts
        self.unavailable = unavailable
        self.state = HostState.LOADING
        self.stats = HostStats()
        self.shard: Shard | None = None
        self._clock_ms = clock_ms
        self._max_inflight = max_inflight
        self._flush_timeout_s = flush_timeout_s
        self._inflight: deque[_Pending] = deque()
        self._open = Result()  # handled, replayed, not yet sent to the writer
        self._wake = threading.Event()
        self._dedupe: OrderedDict[tuple[str, int], Reply] = OrderedDict()
        self._dedupe_entries = dedupe_entries
        self._on_stopped = on_stopped
        self._observer: HostObserver = observer or NullObserver()
        self._active = threading.Event()
        self._writer: ShardWriter | None = None
        self._processor = processor
        self._on_active = on_active
        # Handed to the processor once loaded, unless a stop came first.
        self._lifecycle = threading.Lock()
        self._attached = False
        self._stop_requested = False
        # Work queued (``call_soon``) before the host is attached: the processor would
        # drop it, so it is handed over with the ATTACH.
        self._early: list[object] = []
        # A failed append's reload waits for the end of the step, then runs off the
        # processor's thread (the listener's, in the daemon): ``detached`` tells the
        # processor to let go of this host until it attaches again.
        self._reload_pending = False
        self.detached = False
        # Why the shard reloads once its appends finish (see _reset), if it does.
        self._reset_cause: str | None = None
        # Timers wait until then after the shard's firing threw (clock ms).
        self._timers_resume_ms = 0
        self._timer_failures = 0
        # Internal events to try again: (due clock ms, seq, attempt, event).
        self._retrying: list[tuple[int, int, int, Callable[[Shard, int], Result]]] = []
        self._retry_seq = itertools.count()
        # Set once stopping: when the appends still in flight stop being waited for.
        self._draining_until: float | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._load_then_attach, name=f"shard-{name}", daemon=True
        )

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
            self._enqueue(request)

    def call_soon(self, fn: Callable[[Shard, int], Result]) -> None:
        """Run ``fn`` on the shard as if it were a handler (tests, admin hooks)."""
        self._enqueue(fn)

    def _enqueue(self, event: object) -> None:
        with self._lifecycle:
            if not self._attached:
                if not self._stop_requested:
                    self._early.append(event)
                return
        self._processor.put(self, event)

    @property
    def finished(self) -> bool:
        """The host has stopped and let go of its store."""
        return self._stopped.is_set()

    def wait_active(self, timeout_s: float) -> bool:
        return self._active.wait(timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop once what was handled is answered; waits up to ``timeout_s`` for it,
        except on the processor's thread or the host's loading thread."""
        with self._lifecycle:
            self._stop_requested = True
            attached = self._attached
        if attached:
            self._processor.put(self, _STOP)
        if not self._processor.on_its_thread() and threading.current_thread() is not self._thread:
            self._stopped.wait(timeout_s)

    # -- the loading thread ------------------------------------------------------------

    def _load_then_attach(self) -> None:
        try:
            self._writer = self.parts.make_writer()
            self._load()
        except Exception as exc:
            self.fail(exc)
            return
        with self._lifecycle:
            if not self._stop_requested:
                self._attached = True
                early, self._early = self._early, []
                self._processor.put_many([(self, ATTACH), *((self, e) for e in early)])
                return
        self.finish()

    # -- the driver's calls ------------------------------------------------------------

    def fail(self, exc: Exception) -> None:
        """The host failed with ``exc`` (its load, or a step): log why, then finish."""
        self.finish(self._failure_of(exc))

    def finish(self, failure: Exception | None = None) -> None:
        """Let go of the store, answer what is left and tell the owner the host stopped.

        Called once, by whichever thread drives the host when it stops.
        """
        try:
            self._shutdown()
        finally:
            self._stopped.set()
            if self._on_stopped is not None:
                self._on_stopped(self, failure)

    def refuse(self, request: Request) -> None:
        """Answer a request that reached this host while it was not attached: a host
        that has not stopped is loading, or loaded and about to attach (it turns ACTIVE
        just before its ATTACH reaches the processor), so the client retries."""
        stopped = self.state is HostState.STOPPED
        error = self.unavailable if stopped else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        self.parts.replies.send([Reply(request.ref, request.api, error)])

    def _failure_of(self, exc: Exception) -> Exception:
        """Log why the host stops: an expected stop with one line, anything else with
        its traceback."""
        if isinstance(exc, WriterFencedError):
            log.error("shard writer fenced; stepping down", shard=self.name, error=str(exc))
        elif isinstance(exc, PoisonRecordError):
            # Strict mode: the daemon already reports the record and stops; no traceback.
            log.error("shard load stopped at a poison record", shard=self.name, error=str(exc))
        elif isinstance(exc, LoadCancelledError):
            log.info("shard load cancelled", shard=self.name)  # its owner is closing
        else:
            log.error("shard host failed", shard=self.name, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)  # fmt: skip
        return exc

    def _load(self) -> None:
        thaw()  # a reload drops the shard's old state: let the collector see it again
        with gc_paused():  # a load allocates the whole state at once
            self._load_paused()
            # Before the collector is back: its first run would walk all the new state.
            freeze_long_lived()

    def _load_paused(self) -> None:
        started = time.monotonic()
        self._reset_cause = None  # a load is the reset
        self._timers_resume_ms, self._timer_failures = 0, 0
        self.state = HostState.LOADING
        self._active.clear()
        load = self.parts.recover()
        recovered = time.monotonic()
        shard = self.parts.make_shard()
        fenced = self.parts.policy.fenced_by_controller_epoch
        if load.decoded is not None:
            records = (_in_log_order if fenced else _by_record_type)(load.decoded)
            load.decoded = None
        else:
            records = self._decode_cached()
            if fenced:
                records.sort(key=replay_order)
        replaying = time.monotonic()
        for record in records:
            shard.replay(record)
        self.shard = shard
        self.stats.loads += 1
        self.stats.records_loaded = len(records)
        self.stats.log_records_read = load.stats.records
        activating = time.monotonic()
        self._open.extend(self._apply(shard.on_loaded(self._clock_ms())))
        self._flush(self._flush_timeout_s)
        done = time.monotonic()
        self.stats.load_seconds = done - started
        self.stats.load_phases = {
            **load.phases, "order": replaying - recovered, "replay": activating - replaying,
            "activate": done - activating,
        }  # fmt: skip
        self.state = HostState.ACTIVE
        self._active.set()
        self._observer.loaded(self.name, self.stats.load_seconds, len(records))
        # Per shard at debug: a daemon activates dozens at once; its owner sums them up.
        log.debug("shard active", shard=self.name, keys=len(records),
                  log_records=load.stats.records, rebuilt=load.rebuilt,
                  seconds=round(self.stats.load_seconds, 3),
                  phases={k: round(v, 3) for k, v in self.stats.load_phases.items()})  # fmt: skip
        if self._on_active is not None:
            self._on_active(self)

    def _decode_cached(self) -> list[Record]:
        records: list[Record] = []
        for raw_key, raw_value in self.parts.store.items():
            try:
                key, value = decode_record(raw_key, raw_value)
            except CodecError as exc:  # the cache holds only values that decoded once
                log.warning("undecodable cached record", shard=self.name, error=str(exc))
                continue
            records.append(Record(key, value))
        return records

    def _apply(self, result: Result) -> Result:
        """Encode a result's records (if its handler did not), then replay them.

        Encoding first means a record no schema can hold is refused before anything
        changed. A replay that throws leaves the shard half-changed: :class:`ReplayError`.
        """
        assert self.shard is not None
        encode_records(result.records)
        try:
            return replay_result(self.shard, result)
        except Exception as exc:
            raise ReplayError(f"{type(exc).__name__}: {exc}") from exc

    def wait_s(self) -> float:
        """How long this host may wait for events before a timer is due (at most 0.5 s)."""
        if self._draining_until is not None:  # timers no longer fire; the flush may expire
            return min(max(0.0, self._draining_until - time.monotonic()), 0.5)
        shard = self.shard
        deadline = None if shard is None or self._reset_cause else shard.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self._timers_resume_ms)
        if self._retrying:
            retry_at = self._retrying[0][0]
            deadline = retry_at if deadline is None else min(deadline, retry_at)
        wait_s = 0.5 if deadline is None else max(0.0, (deadline - self._clock_ms()) / 1000)
        return min(wait_s, 0.5)

    def step(self, events: list[object], turn: Turn) -> bool:
        """Handle ``events``, fire due timers and move the append pipeline within ``turn``
        (a new batch joins its appends, durable ones go into its cache write); False
        once stopped. Only the processor's thread calls it."""
        assert self.shard is not None
        if self._draining_until is not None:
            return self._drain(events, turn)
        if self._reset_cause is not None:
            return self._step_resetting(events, turn)
        now = self._clock_ms()
        later: list[object] | None = None
        if self._retrying and self._retrying[0][0] <= now:
            events = self._due_retries(now) + events
        for index, event in enumerate(events):
            if event is _STOP:
                later = events[index + 1 :]  # refused by the drain
                break
            if event is WAKE:
                continue
            if self._reset_cause is None:
                self._open.extend(self._handle(event, now))
            elif isinstance(event, Request):  # this shard is to be reset: see _reset
                self.parts.replies.send(
                    [Reply(event.ref, event.api, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
                )
        self._open.extend(self._fire_timers())
        if later is not None:
            # What was handled is appended and answered before the host stops, but the
            # processor does not wait for it: later steps finish the appends.
            self._draining_until = time.monotonic() + self._flush_timeout_s
            return self._drain(later, turn)
        self._pump(turn)
        if self._reload_pending:
            self._detach_to_reload()
        elif self._reset_cause is not None:
            return self._step_resetting([], turn)
        return True

    # -- failures that leave the shard serving -----------------------------------------------

    def _fire_timers(self) -> Result:
        """Fire due timers. The shards guard each timer themselves (put back, retried with
        a backoff, dropped if it keeps failing); should a shard's own firing throw, its
        timers wait a backoff here instead of stopping the host."""
        assert self.shard is not None
        now = self._clock_ms()
        if now < self._timers_resume_ms or self._reset_cause is not None:
            return Result()
        try:
            result = self.shard.fire_timers(now)
        except Exception as exc:
            self._timer_failures += 1
            backoff_ms = int(doubling(EVENT_BACKOFF_MS, self._timer_failures - 1,
                                      EVENT_BACKOFF_MAX_MS))  # fmt: skip
            self._timers_resume_ms = now + backoff_ms
            log.error("shard timers failed; retrying after a backoff", shard=self.name,
                      backoff_ms=backoff_ms, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)  # fmt: skip
            return Result()
        self._timer_failures = 0
        try:
            return self._apply(result)
        except Exception as exc:
            self._reset("timer result failed", exc)
            return Result()

    def _event(self, fn: Callable[[Shard, int], Result], now: int, attempt: int) -> Result:
        """An internal event (new topics, an admin hook), guarded like a handler: one that
        throws is retried after a backoff, and dropped if it keeps failing."""
        assert self.shard is not None
        try:
            result = fn(self.shard, now)
        except Exception as exc:
            if attempt + 1 >= EVENT_ATTEMPTS:
                log.error("shard event failed again; dropped", shard=self.name, handler=_name(fn),
                          attempts=attempt + 1, error=f"{type(exc).__name__}: {exc}",
                          exc_info=exc)  # fmt: skip
                return Result()
            backoff_ms = int(doubling(EVENT_BACKOFF_MS, attempt, EVENT_BACKOFF_MAX_MS))
            heapq.heappush(
                self._retrying, (now + backoff_ms, next(self._retry_seq), attempt + 1, fn)
            )
            log.error("shard event failed; retrying after a backoff", shard=self.name,
                      handler=_name(fn), backoff_ms=backoff_ms,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            return Result()
        try:
            return self._apply(result)
        except Exception as exc:
            self._reset("event result failed", exc)
            return Result()

    def _due_retries(self, now: int) -> list[object]:
        due: list[object] = []
        while self._retrying and self._retrying[0][0] <= now:
            _, _, attempt, fn = heapq.heappop(self._retrying)
            due.append(_Retry(fn, attempt))
        return due

    def _reset(self, cause: str, exc: BaseException) -> None:
        """The shard's memory can no longer be trusted (a replay threw half-way): take no
        new work, let what was handled before become durable and be answered, then load
        the shard again from the cache and the log."""
        if self._reset_cause is None:
            log.error("shard state suspect; reloading it once its appends finish",
                      shard=self.name, cause=cause, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)  # fmt: skip
            self._reset_cause = cause

    def _step_resetting(self, events: list[object], turn: Turn) -> bool:
        """A step while a reset waits for the appends before it. Requests are refused as
        loading (retriable); internal events are dropped, as the reload rebuilds what they
        would have told the shard (its owner hands new topics to a loaded shard)."""
        refused = [e for e in events if isinstance(e, Request)]
        self.parts.replies.send([Reply(e.ref, e.api, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                                 for e in refused])  # fmt: skip
        self._pump(turn)
        if self._reload_pending:  # an append failed meanwhile: its reload does it all
            self._reset_cause = None
            self._detach_to_reload()
            return True
        if self._open or self._inflight:
            return True
        cause, self._reset_cause = self._reset_cause, None
        self._observer.restarted(self.name, "reset")
        log.warning("reloading shard", shard=self.name, cause=cause)
        if self._writer is not None:
            self._writer.close()
        self._detach_to_reload()
        return True

    def _drain(self, events: list[object], turn: Turn) -> bool:
        """A stopping host's step: no new work, its appends move on; False once they
        are all answered (or the flush timeout passed: the shutdown answers the rest)."""
        refused = [Reply(e.ref, e.api, self.unavailable) for e in events if isinstance(e, Request)]
        self.parts.replies.send(refused)
        self._pump(turn)
        self._reload_pending = False  # a stopping host does not reload
        assert self._draining_until is not None
        return bool(self._open or self._inflight) and time.monotonic() < self._draining_until

    def _detach_to_reload(self) -> None:
        """Reload on a thread of its own, as the first load did; then attach again.

        The processor's thread serves every other shard (and, in the daemon, every
        connection): a reload (a new producer id, the leader marker, the log's tail)
        must not hold it. Meanwhile this shard's requests are refused as loading.
        """
        self._reload_pending = False
        self.state = HostState.LOADING
        self._active.clear()
        with self._lifecycle:
            self._attached = False
        self.detached = True
        threading.Thread(
            target=self._load_then_attach, name=f"shard-{self.name}-reload", daemon=True
        ).start()

    def _handle(self, event: object, now: int) -> Result:
        assert self.shard is not None
        if not isinstance(event, Request):
            if isinstance(event, _Retry):
                return self._event(event.fn, now, event.attempt)
            return self._event(event, now, 0)  # type: ignore[arg-type]
        self.stats.requests += 1
        cached = self._dedupe.get((event.ref.client_id, event.ref.correlation_id))
        if cached is not None:
            # A retry, maybe on a new connection: answer where it came from this time.
            return Result(replies=[replace(cached, to=event.ref)])
        try:
            result = self.shard.handle(event, now)
        except ProtocolError as exc:
            return Result(replies=[Reply(event.ref, event.api, exc.code, None, exc.message)])
        except Exception as exc:
            log.exception("handler failed", shard=self.name, api=event.api)
            return Result(replies=[_server_error(event, exc)])
        try:
            return self._apply(result)
        except ReplayError as exc:
            self._reset(f"{event.api} replay failed", exc)
            return Result(replies=[_server_error(event, exc)])
        except Exception as exc:  # not encodable: nothing was replayed
            log.error("handler result refused", shard=self.name, api=event.api,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            self._reset(f"{event.api} result not encodable", exc)
            return Result(replies=[_server_error(event, exc)])

    # -- the append pipeline ---------------------------------------------------------

    def _pump(self, turn: Turn | None = None) -> None:
        """Answer what finished, send what is open (a writer may finish it at once), again."""
        self._release(turn)
        self._submit_open(turn)
        self._release(turn)

    def _submit_open(self, turn: Turn | None) -> None:
        """Send what the handlers produced since the last append, if the pipeline has room.

        A turn with only replies still queues behind the appends before it: its
        replies may read state those appends have not made durable yet.
        """
        if not self._open or len(self._inflight) >= self._max_inflight:
            return
        if turn is not None and not turn.may_append and self._open.records:
            turn.hold(self)  # an earlier group is in flight: these join the next one
            return
        result, self._open = self._open, Result()
        pending = _Pending(result, time.monotonic())
        self._inflight.append(pending)
        if not result.records:
            pending.done = True
            return
        assert self._writer is not None
        pending.raw = raw_records(result.records)  # encoded by _apply already
        if turn is None:
            self._writer.submit(pending.raw, functools.partial(self._delivered, pending))
        else:
            done = turn.appends.join(
                functools.partial(_Pending.record, pending),
                functools.partial(self._finished, pending),
                self,
            )  # fmt: skip
            self._writer.submit(pending.raw, done)

    def _delivered(self, pending: _Pending, offsets: list[int], error: AppendError | None) -> None:
        """From the writer's thread (or inline), off any turn (a load's activation): mark
        done and wake :meth:`_flush`."""
        pending.record(offsets, error)
        pending.done = True
        self._wake.set()

    def _finished(self, pending: _Pending) -> None:
        """Every batch of the turn ``pending`` joined is in; the barrier wakes the processor."""
        pending.done = True
        self._wake.set()

    def _release(self, turn: Turn | None = None) -> None:
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
            self._remember(replies)
            self.parts.replies.send(replies)
        if failed is not None:
            self._failed(failed, list(self._inflight), turn)

    def _flush(self, timeout_s: float) -> None:
        """Append everything handled so far and wait until it is answered."""
        deadline = time.monotonic() + timeout_s
        while self._open or self._inflight:
            self._wake.clear()
            self._pump()
            if not (self._open or self._inflight):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AppendError(
                    f"{self.name}: appends not acknowledged in {timeout_s}s", retriable=True
                )
            self._wake.wait(min(remaining, 0.5))

    def _failed(self, error: AppendError, lost: list[_Pending], turn: Turn | None) -> None:
        """An append failed: it and everything after it is unanswered, then rebuild."""
        if turn is not None:
            turn.cache.write()  # the reload reads the cache: what is durable goes in first
        self._inflight.clear()
        replies = [r for p in lost for r in p.result.replies] + self._open.replies
        self._open = Result()
        self.parts.replies.send(self._unavailable(replies))
        if isinstance(error, WriterFencedError):
            raise error
        log.warning("append failed; reloading shard", shard=self.name, error=str(error))
        self._observer.restarted(self.name, "append_failed")
        if self._writer is not None:
            self._writer.close()
        if self._processor.on_its_thread():
            self._reload_pending = True  # see _detach_to_reload
            return
        self._writer = self.parts.make_writer()
        self._load()

    def _store(self, durable: list[_Pending], turn: Turn | None) -> None:
        """Fold durable batches into the cache with the checkpoint after the last one,
        in one write (or into the turn's write, shared with the other shards)."""
        if not durable:
            return
        changes: dict[bytes, Change] = {}
        expiry = self.parts.policy.expiry
        next_offset = 0
        for pending in durable:
            for record, (key, value), offset in zip(
                pending.result.records, pending.raw, pending.offsets, strict=True
            ):
                if value is None or record.value is None:
                    changes[key] = Change(None)
                else:
                    changes[key] = new_change(value, expiry(record.key, record.value), offset)
            next_offset = max(next_offset, max(pending.offsets) + 1)
        store, identity, now = self.parts.store, self.parts.identity, self._clock_ms()
        if turn is None:
            store.apply(changes, next_offset=next_offset, identity=identity, now_ms=now)
        else:
            store.stage(turn.cache, changes, next_offset=next_offset, identity=identity,
                        now_ms=now)  # fmt: skip
        finished = time.monotonic()
        for pending in durable:
            self.stats.batches += 1
            self.stats.records_written += len(pending.raw)
            self._observer.appended(self.name, len(pending.raw), finished - pending.submitted)

    def _unavailable(self, replies: list[Reply]) -> list[Reply]:
        return [Reply(r.to, r.api, self.unavailable) for r in replies]

    def _remember(self, replies: list[Reply]) -> None:
        for reply in replies:
            if reply.to.correlation_id < 0:
                continue  # a push (a hint to a member), not the answer to a request
            self._observer.answered(self.name, reply.api, reply.error)
            if reply.error is not ErrorCode.NONE:
                self.stats.errors[reply.error.name] = self.stats.errors.get(reply.error.name, 0) + 1
            if reply.error.retriable:
                continue
            self._dedupe[(reply.to.client_id, reply.to.correlation_id)] = reply
            if len(self._dedupe) > self._dedupe_entries:
                self._dedupe.popitem(last=False)

    def _shutdown(self) -> None:
        thaw()
        self.state = HostState.STOPPED
        self._active.clear()
        # Unanswered appends may still land; a retriable error lets callers retry.
        parked = [r for p in self._inflight for r in p.result.replies] + self._open.replies
        self._inflight.clear()
        self._open = Result()
        if self.shard is not None:
            parked += self.shard.on_unloaded()
        self.parts.replies.send(self._unavailable(parked))
        if self._writer is not None:
            self._writer.close()
        log.info("shard stopped", shard=self.name)


__all__ = ["HostParts", "HostState", "ShardHost"]
