"""Runs one shard, after Kafka's ``CoordinatorRuntime``: loads it, then handles its
requests, timers and internal events in steps driven by a processor.

A host loads on a thread of its own (:mod:`.loader`), then attaches to its processor
(:mod:`.processor`), which steps it within a :class:`~.turn.Turn` shared with the other
shards it drives; the host knows its processor only through :mod:`.driven`. In a step
the host runs each event's handler and replays the returned records into the shard at
once (later handlers see them), fires due timers, and moves its append pipeline
(:mod:`.appends`: group commit, then write, then answer). A retried request gets the
answer it already had (:mod:`.reply_cache`); a handler, timer or event that throws
leaves the shard serving (:mod:`.guards`).

A failed append, or a replay that threw, discards the shard: the host lets go of the
processor and reloads on a thread of its own, then attaches again. A fenced writer
stops it for good. A stopping host takes no new work and leaves once what it handled
is answered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

import structlog

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.gc_pause import thaw
from kafkacoord.threads import spawn

from .appends import AppendPipeline, refusals
from .clock import steady_ms
from .driven import ATTACH, WAKE, Processor
from .guards import Event, Guards
from .host_parts import HostParts, HostState, HostStats, logged_failure
from .loader import ShardLoader
from .observer import HostObserver, NullObserver
from .reply_cache import ReplyCache
from .shard import Reply, Request, Result, Shard
from .turn import Turn

log = structlog.get_logger(__name__)

_STOP: Final = object()  # stop once what was handled is answered


class ShardHost:
    """Runs one shard on its processor, with group commit and write-then-answer (see the
    module docstring)."""

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
        self._processor = processor
        self._replies = parts.replies
        self._clock_ms = clock_ms
        self._flush_timeout_s = flush_timeout_s
        self._on_stopped = on_stopped
        self._on_active = on_active
        observer = observer or NullObserver()
        self._observer = observer
        answered = ReplyCache(name, entries=dedupe_entries, errors=self.stats.errors,
                              observer=observer)  # fmt: skip
        self._answered = answered
        self.appends = AppendPipeline(
            name, parts, owner=self, replies=self._replies, answered=answered,
            stats=self.stats, observer=observer, clock_ms=clock_ms, unavailable=unavailable,
            max_inflight=max_inflight,
        )  # fmt: skip
        self._loader = ShardLoader(name, appends=self.appends, stats=self.stats,
                                   observer=observer, clock_ms=clock_ms,
                                   flush_timeout_s=flush_timeout_s)  # fmt: skip
        self._guards = Guards(name)
        self._active = threading.Event()
        self._stopped = threading.Event()
        # Handed to the processor once loaded, unless a stop came first.
        self._lifecycle = threading.Lock()
        self._attached = False
        self._stop_requested = False
        # Work queued (``call_soon``) before the host is attached: the processor would
        # drop it, so it is handed over with the ATTACH.
        self._early: list[object] = []
        # Set while the host lets go of its processor to reload (see _detach_to_reload).
        self.detached = False
        # Set once stopping: when the appends still in flight stop being waited for.
        self._draining_until: float | None = None
        self._loader_thread = spawn(f"shard-{name}", self._load_then_attach, start=False)

    # -- owner API ---------------------------------------------------------------------

    def start(self) -> ShardHost:
        self._loader_thread.start()
        return self

    def submit(self, request: Request) -> None:
        if self.state is HostState.LOADING:
            self._refuse([request], ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        elif self.state is HostState.STOPPED:
            self._refuse([request], self.unavailable)
        else:
            self._enqueue(request)

    def call_soon(self, fn: Event) -> None:
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
        if (
            not self._processor.on_its_thread()
            and threading.current_thread() is not self._loader_thread
        ):
            self._stopped.wait(timeout_s)

    # -- the processor's calls -----------------------------------------------------------

    def wait_s(self) -> float:
        """How long this host may wait for events before a timer is due (at most 0.5 s)."""
        if self._draining_until is not None:  # timers no longer fire; the flush may expire
            return min(max(0.0, self._draining_until - time.monotonic()), 0.5)
        deadline = self._guards.next_deadline_ms(self.shard)
        wait_s = 0.5 if deadline is None else max(0.0, (deadline - self._clock_ms()) / 1000)
        return min(wait_s, 0.5)

    def step(self, events: list[object], turn: Turn) -> bool:
        """Handle ``events``, fire due timers and move the append pipeline within ``turn``
        (a new batch joins its appends, durable ones go into its cache write); False
        once stopped. Only the processor's thread calls it."""
        shard = self.shard
        assert shard is not None
        if self._draining_until is not None:
            return self._drain(events, turn)
        guards = self._guards
        if guards.reset_cause is not None:
            return self._step_resetting(events, turn)
        now = self._clock_ms()
        due = guards.due_retries(now)
        if due:
            events = due + events
        later: list[object] | None = None
        for index, event in enumerate(events):
            if event is _STOP:
                later = events[index + 1 :]  # refused by the drain
                break
            if event is WAKE:
                continue
            if guards.reset_cause is None:
                self.appends.add(self._handle(shard, event, now))
            elif isinstance(event, Request):  # this shard is to be reset: see Guards.reset
                self._refuse([event], ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        self.appends.add(guards.fire_timers(shard, self._clock_ms()))
        if later is not None:
            # What was handled is appended and answered before the host stops, but the
            # processor does not wait for it: later steps finish the appends.
            self._draining_until = time.monotonic() + self._flush_timeout_s
            return self._drain(later, turn)
        self.appends.pump(turn)
        if self.appends.reload_needed:
            return self._detach_to_reload()
        if guards.reset_cause is not None:
            return self._step_resetting([], turn)
        return True

    def refuse(self, request: Request) -> None:
        """Answer a request that reached this host while it was not attached: a host
        that has not stopped is loading, or loaded and about to attach (it turns ACTIVE
        just before its ATTACH reaches the processor), so the client retries."""
        stopped = self.state is HostState.STOPPED
        error = self.unavailable if stopped else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        self._refuse([request], error)

    def fail(self, exc: Exception) -> None:
        """The host failed with ``exc`` (its load, or a step): log why, then finish."""
        self.finish(logged_failure(self.name, exc))

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

    # -- steps -------------------------------------------------------------------------

    def _handle(self, shard: Shard, event: object, now: int) -> Result:
        """One event of a step: a request (one answered before gets that answer again),
        or an internal event."""
        if not isinstance(event, Request):
            return self._guards.event(shard, event, now)
        self.stats.requests += 1
        answered = self._answered.answer(event)
        if answered is not None:  # a retry, maybe on a new connection
            return Result(replies=[answered])
        return self._guards.handle(shard, event, now)

    def _refuse(self, events: list[object], error: ErrorCode) -> None:
        refused = [Reply(e.ref, e.api, error) for e in events if isinstance(e, Request)]
        if refused:
            self._replies.send(refused)

    def _step_resetting(self, events: list[object], turn: Turn) -> bool:
        """A step while a reset waits for the appends before it. Requests are refused as
        loading (retriable); internal events are dropped, as the reload rebuilds what they
        would have told the shard (its owner hands new topics to a loaded shard)."""
        self._refuse(events, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        self.appends.pump(turn)
        if not self.appends.reload_needed:  # else an append failed meanwhile: it reloads
            if self.appends.unanswered:
                return True
            self._observer.restarted(self.name, "reset")
            log.warning("reloading shard", shard=self.name, cause=self._guards.reset_cause)
            self.appends.close_writer()
        self._guards.reset_cause = None
        return self._detach_to_reload()

    def _drain(self, events: list[object], turn: Turn) -> bool:
        """A stopping host's step: no new work, its appends move on; False once they
        are all answered (or the flush timeout passed: the shutdown answers the rest)."""
        self._refuse(events, self.unavailable)
        self.appends.pump(turn)
        self.appends.reload_needed = False  # a stopping host does not reload
        assert self._draining_until is not None
        return self.appends.unanswered and time.monotonic() < self._draining_until

    # -- loading and stopping ----------------------------------------------------------

    def _load_then_attach(self) -> None:
        """Load (on a thread of its own), then hand the host to its processor."""
        if self._stopping():  # asked before a reload got under way
            self.finish()
            return
        try:
            self.state = HostState.LOADING
            self._active.clear()
            self._loader.load(self.parts, self._replayed, self._stopping)
            self.state = HostState.ACTIVE
            self._active.set()
            if self._on_active is not None:
                self._on_active(self)
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

    def _stopping(self) -> bool:
        with self._lifecycle:
            return self._stop_requested

    def _replayed(self, shard: Shard) -> None:
        """The load replayed a new shard: it serves from now on, timers afresh."""
        self._guards.loaded()
        self.shard = shard

    def _detach_to_reload(self) -> bool:
        """Reload on a thread of its own, as the first load did; then attach again.

        The processor's thread serves every other shard (and, in the daemon, every
        connection): a reload (a new producer id, the leader marker, the log's tail)
        must not hold it. Meanwhile this shard's requests are refused as loading.

        False, and no reload, once a stop was asked for (it may wait in the queue behind
        the step that failed): a controller that lost its lease while its append hung
        would otherwise open a new writer and fence the controller that won.
        """
        self.appends.reload_needed = False
        with self._lifecycle:
            if self._stop_requested:
                return False
            self._attached = False
        self.state = HostState.LOADING
        self._active.clear()
        self.detached = True
        spawn(f"shard-{self.name}-reload", self._load_then_attach)
        return True

    def _shutdown(self) -> None:
        thaw()
        self.state = HostState.STOPPED
        self._active.clear()
        # Unanswered appends may still land; a retriable error lets callers retry.
        parked = self.appends.drop()
        if self.shard is not None:
            parked += self.shard.on_unloaded()
        self._replies.send(refusals(parked, self.unavailable))
        self.appends.close_writer()
        log.info("shard stopped", shard=self.name)


__all__ = ["HostParts", "HostState", "HostStats", "ShardHost"]
