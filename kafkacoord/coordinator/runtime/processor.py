"""Processors: what drives shard hosts, as Kafka's coordinator runtime drives its
shards with one event processor.

Every host is driven by a processor, and only there: the processor takes the events
of all its hosts from one queue and gives each host that has events, or a timer due,
one step per turn (:func:`run_turn`); under load a turn handles many requests and one
append carries them all. With a thread per shard, every request would cost a thread
switch into its shard and the shards' turns would contend for the interpreter. A host
loads on a thread of its own and is driven here only once it is active.

:class:`ShardProcessor` runs its turns on a thread of its own: the controller shard
has one to itself, as a controller step waits for its transaction's commit.
:class:`LoopProcessor` runs them on an event loop's thread: the daemon's group shards
take their turns on the listener's loop.

A turn is also a group commit across shards (:mod:`.turn`): the batches every shard
sends in one turn finish together and wake the processor once, and the next turn
folds them into one cache write before any of their replies go out.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Final, cast

import structlog

from kafkacoord.threads import spawn

from .driven import ATTACH, WAKE, DrivenHost, Processor
from .shard import Reply, Request, send_replies
from .turn import STALL_S, GroupCommits, Turn

log = structlog.get_logger(__name__)

_CLOSE: Final = object()


class TurnReplies:
    """A reply sink that holds the replies of one processor turn and sends them together.

    Many shards answering the same connection in one turn then cost one hand-over to
    the listener, not one per shard. Replies from any other thread go out at once.
    """

    def __init__(self, processor: Processor) -> None:
        self._processor = processor
        self._held: list[Reply] = []

    def send(self, replies: Sequence[Reply]) -> None:
        if not replies:
            return
        if self._processor.on_its_thread():
            self._held.extend(replies)
        else:
            send_replies(replies)

    def flush(self) -> None:
        held, self._held = self._held, []
        if held:
            send_replies(held)


class ShardProcessor:
    """Drives hosts on a thread of its own (the controller's; group shards outside the
    daemon)."""

    def __init__(
        self,
        name: str = "shards",
        *,
        max_batch: int = 5000,
        max_inflight_groups: int = 4,
        stall_s: float = STALL_S,
    ) -> None:
        self.name = name
        self.replies = TurnReplies(self)
        self._commits = group_commits(self.put_many, max_inflight_groups, stall_s)
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[DrivenHost | None, object]] = queue.SimpleQueue()
        self._hosts: dict[int, DrivenHost] = {}
        self._runner = spawn(name, self._run)

    def put(self, host: DrivenHost, event: object) -> None:
        self._queue.put((host, event))

    def put_many(self, events: Sequence[tuple[DrivenHost, object]]) -> None:
        """Many events in one hand-over: one wake-up of the processor, not one each."""
        self._queue.put((None, events))

    def on_its_thread(self) -> bool:
        return threading.current_thread() is self._runner

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=next_wake_s(self._hosts, self._commits))
            except queue.Empty:
                first = None
            taken = [] if first is None else [first]
            while len(taken) < self._max_batch:
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(event is _CLOSE for _, event in taken):
                self.replies.flush()
                return
            try:
                self._turn(_flatten(taken))
            finally:
                self.replies.flush()

    def _turn(self, batch: list[tuple[DrivenHost, object]]) -> None:
        run_turn(self._hosts, batch, self._commits)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop driving; owners stop their hosts first."""
        self._queue.put((None, _CLOSE))
        if not self.on_its_thread():
            self._runner.join(timeout_s)


def _only_requests(events: Sequence[tuple[DrivenHost, object]]) -> bool:
    return all(isinstance(event, Request) for _, event in events)


def _flatten(batch: list[tuple[DrivenHost | None, object]]) -> list[tuple[DrivenHost, object]]:
    events: list[tuple[DrivenHost, object]] = []
    for host, event in batch:
        if host is not None:
            events.append((host, event))
        else:
            events.extend(cast("Sequence[tuple[DrivenHost, object]]", event))
    return events


def group_commits(
    put_many: Callable[[Sequence[tuple[DrivenHost, object]]], None],
    max_inflight: int = 4,
    stall_s: float = STALL_S,
) -> GroupCommits:
    """A processor's group commits: finished batches wake each of their hosts."""

    def wake(waiters: list[object]) -> None:
        put_many([(cast("DrivenHost", host), WAKE) for host in waiters])

    return GroupCommits(wake, max_inflight=max_inflight, stall_s=stall_s)


def next_wake_s(hosts: dict[int, DrivenHost], commits: GroupCommits) -> float:
    """How long a processor may wait for events: until a host's timer is due or the
    oldest group in flight counts as stalled (at most 0.5 s)."""
    wait_s = min((h.wait_s() for h in hosts.values()), default=0.5)
    stalled_in = commits.wait_s()
    return wait_s if stalled_in is None else min(wait_s, stalled_in)


def run_turn(
    hosts: dict[int, DrivenHost],
    batch: list[tuple[DrivenHost, object]],
    commits: GroupCommits,
) -> None:
    """One turn: each attached host with events, a timer due or records held back
    takes a step.

    The hosts step within one :class:`Turn`: the batches they send finish together
    (then each of them is woken), and what they fold into the cache is written once,
    here, before the processor sends the turn's replies.
    """
    turn, held = commits.begin()
    turns: dict[int, tuple[DrivenHost, list[object]]] = {}
    for waiting in held:
        host = cast("DrivenHost", waiting)
        if id(host) in hosts:
            turns[id(host)] = (host, [])
    for host, event in batch:
        key = id(host)
        if event is ATTACH:
            hosts[key] = host
            turns.setdefault(key, (host, []))
        elif key in hosts:
            turns.setdefault(key, (host, []))[1].append(event)
        elif isinstance(event, Request):
            # The host stopped, or went to reload, after the request was queued for it.
            host.refuse(event)
    for key, host in hosts.items():
        if key not in turns and host.wait_s() <= 0:
            turns[key] = (host, [])  # a timer is due
    stepped: list[DrivenHost] = []
    try:
        for key, (host, events) in turns.items():
            try:
                alive = host.step(events, turn)
                stepped.append(host)
            except Exception as exc:
                del hosts[key]
                _stop(host, exc)
                continue
            if not alive:
                del hosts[key]
                _stop(host, None)
            elif host.detached:  # reloading elsewhere; it attaches again once loaded
                host.detached = False
                del hosts[key]
    finally:
        commits.end(turn)
        _write_cache(hosts, turn, stepped)


def _write_cache(hosts: dict[int, DrivenHost], turn: Turn, stepped: list[DrivenHost]) -> None:
    """The turn's one cache write. If it fails, the hosts that stepped stop: their
    appends are durable (their replies still go out) but their cache is behind."""
    try:
        turn.cache.write()
    except Exception as exc:
        log.exception("cache write of a turn failed")
        for host in stepped:
            if hosts.pop(id(host), None) is not None:
                _stop(host, exc)


class LoopProcessor:
    """Drives hosts on an asyncio loop's thread: the listener's own.

    Requests read by the listener then reach their shard with no thread switch, and
    replies go out on the same thread; only finished appends and loads cross over.
    No turn waits on the broker: a stopping host's appends finish in later turns, and
    a reload after a failed append runs on the host's own thread.

    While as many groups are in flight as allowed, a new turn could only hold its
    records back; requests read meanwhile then wait (at most ``max_defer_s``) for the
    turn that the next finished group starts, so a group costs one turn, not one per
    read. With nothing in flight a request is handled at once.

    One group in flight by default: the batch producer keeps one produce request in
    flight per broker anyway, so more groups only split the same appends into more
    turns and barriers. With the producer on this loop, four groups cost a fifth more
    daemon CPU per commit than one (bench/README.md).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        thread_id: int,
        name: str = "shards",
        *,
        max_inflight_groups: int = 1,
        max_defer_s: float = 0.005,
        stall_s: float = STALL_S,
    ) -> None:
        self.name = name
        self.replies = TurnReplies(self)
        self._commits = group_commits(self.put_many, max_inflight_groups, stall_s)
        self._max_defer_s = max_defer_s
        self._deferred: asyncio.TimerHandle | None = None
        self._loop = loop
        self._thread_id = thread_id
        self._hosts: dict[int, DrivenHost] = {}
        self._pending: list[tuple[DrivenHost, object]] = []
        self._lock = threading.Lock()
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._closed = False

    def put(self, host: DrivenHost, event: object) -> None:
        self.put_many([(host, event)])

    def put_many(self, events: Sequence[tuple[DrivenHost, object]]) -> None:
        on_loop = self.on_its_thread()
        with self._lock:
            self._pending.extend(events)
            if self._scheduled or self._closed:
                return
            if on_loop and self._commits.saturated and _only_requests(events):
                # The finished group's wake-up runs the turn; the timer bounds the wait.
                if self._deferred is None:
                    self._deferred = self._loop.call_later(self._max_defer_s, self._run)
                return
            self._scheduled = True
        if on_loop:
            self._loop.call_soon(self._run)
        else:
            self._loop.call_soon_threadsafe(self._run)

    def on_its_thread(self) -> bool:
        return threading.get_ident() == self._thread_id

    def _run(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._scheduled = False
        if self._deferred is not None:
            self._deferred.cancel()
            self._deferred = None
        try:
            run_turn(self._hosts, batch, self._commits)
        finally:
            self.replies.flush()
            self._arm_timer()

    def _arm_timer(self) -> None:
        if not self._hosts or self._closed:
            return
        at = self._loop.time() + next_wake_s(self._hosts, self._commits)
        if self._timer is not None and not self._timer.cancelled() and self._timer_at <= at:
            return  # an earlier wake-up is already set
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self._loop.call_at(at, self._on_timer), at

    def _on_timer(self) -> None:
        self._timer = None
        self._run()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop driving; owners stop their hosts first."""
        self._closed = True
        for timer in (self._timer, self._deferred):
            if timer is not None:
                self._loop.call_soon_threadsafe(timer.cancel)


def _stop(host: DrivenHost, failure: Exception | None) -> None:
    """Stop one host; an error while it stops is its own, never the processor's, which
    drives every other shard (and any this daemon leads later)."""
    try:
        if failure is None:
            host.finish()
        else:
            host.fail(failure)
    except Exception:
        log.exception("a shard host failed while stopping", shard=getattr(host, "name", None))
