"""One thread that drives many shard hosts, as Kafka's coordinator runtime does.

With a thread per shard, every request costs a thread switch into its shard and the
shards' turns contend for the interpreter. The processor takes every hosted shard's
events from one queue and gives each host that has events, or a timer due, one turn
per batch; under load a turn handles many requests and one append carries them all.
A host loads on a thread of its own and is driven here only once it is active.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol, cast

import structlog

from .shard import Reply, Request, send_replies

if TYPE_CHECKING:
    from .host import ShardHost

log = structlog.get_logger(__name__)

ATTACH: Final = object()  # a host finished loading: drive it from now on
_CLOSE: Final = object()


class Processor(Protocol):
    """What a host needs from whatever drives it (a thread, or an event loop)."""

    replies: TurnReplies

    def put(self, host: ShardHost, event: object) -> None: ...

    def put_many(self, events: list[tuple[ShardHost, object]]) -> None: ...

    def on_its_thread(self) -> bool: ...

    def close(self, timeout_s: float = 10.0) -> None: ...


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
    """Drives hosts on a thread of its own."""

    def __init__(self, name: str = "shards", *, max_batch: int = 5000) -> None:
        self.name = name
        self.replies = TurnReplies(self)
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[ShardHost | None, object]] = queue.SimpleQueue()
        self._hosts: dict[int, ShardHost] = {}
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, host: ShardHost, event: object) -> None:
        self._queue.put((host, event))

    def put_many(self, events: list[tuple[ShardHost, object]]) -> None:
        """Many events in one hand-over: one wake-up of the processor, not one each."""
        self._queue.put((None, events))

    def on_its_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            timeout = min((h.wait_s() for h in self._hosts.values()), default=0.5)
            try:
                first = self._queue.get(timeout=timeout)
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

    def _turn(self, batch: list[tuple[ShardHost, object]]) -> None:
        run_turn(self._hosts, batch)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop driving; owners stop their hosts first."""
        self._queue.put((None, _CLOSE))
        if not self.on_its_thread():
            self._thread.join(timeout_s)


def _flatten(batch: list[tuple[ShardHost | None, object]]) -> list[tuple[ShardHost, object]]:
    events: list[tuple[ShardHost, object]] = []
    for host, event in batch:
        if host is not None:
            events.append((host, event))
        else:
            events.extend(cast("list[tuple[ShardHost, object]]", event))
    return events


def run_turn(hosts: dict[int, ShardHost], batch: list[tuple[ShardHost, object]]) -> None:
    """One turn: each attached host with events, or with a timer due, takes a step."""
    turns: dict[int, tuple[ShardHost, list[object]]] = {}
    for host, event in batch:
        key = id(host)
        if event is ATTACH:
            hosts[key] = host
            turns.setdefault(key, (host, []))
        elif key in hosts:
            turns.setdefault(key, (host, []))[1].append(event)
        elif isinstance(event, Request):
            # The host stopped after the request was queued for it.
            host.parts.replies.send([Reply(event.ref, event.api, host.unavailable)])
    for key, host in hosts.items():
        if key not in turns and host.wait_s() <= 0:
            turns[key] = (host, [])  # a timer is due
    for key, (host, events) in turns.items():
        failure: Exception | None = None
        try:
            alive = host.step(events)
        except Exception as exc:
            alive, failure = False, host._failure_of(exc)
        if not alive:
            del hosts[key]
            host._finish(failure)


class LoopProcessor:
    """Drives hosts on an asyncio loop's thread: the listener's own.

    Requests read by the listener then reach their shard with no thread switch, and
    replies go out on the same thread; only finished appends and loads cross over.
    A turn that blocks (a stop's flush, a reload after a failed append) holds up
    the listener while it lasts.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, thread_id: int, name: str = "shards"):
        self.name = name
        self.replies = TurnReplies(self)
        self._loop = loop
        self._thread_id = thread_id
        self._hosts: dict[int, ShardHost] = {}
        self._pending: list[tuple[ShardHost, object]] = []
        self._lock = threading.Lock()
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._closed = False

    def put(self, host: ShardHost, event: object) -> None:
        self.put_many([(host, event)])

    def put_many(self, events: list[tuple[ShardHost, object]]) -> None:
        with self._lock:
            self._pending.extend(events)
            if self._scheduled or self._closed:
                return
            self._scheduled = True
        if self.on_its_thread():
            self._loop.call_soon(self._run)
        else:
            self._loop.call_soon_threadsafe(self._run)

    def on_its_thread(self) -> bool:
        return threading.get_ident() == self._thread_id

    def _run(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._scheduled = False
        try:
            run_turn(self._hosts, batch)
        finally:
            self.replies.flush()
            self._arm_timer()

    def _arm_timer(self) -> None:
        if not self._hosts or self._closed:
            return
        at = self._loop.time() + min(h.wait_s() for h in self._hosts.values())
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
        timer = self._timer
        if timer is not None:
            self._loop.call_soon_threadsafe(timer.cancel)
