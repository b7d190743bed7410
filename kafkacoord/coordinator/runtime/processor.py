"""One thread that drives many shard hosts, as Kafka's coordinator runtime does.

With a thread per shard, every request costs a thread switch into its shard and the
shards' turns contend for the interpreter. The processor takes every hosted shard's
events from one queue and gives each host that has events, or a timer due, one turn
per batch; under load a turn handles many requests and one append carries them all.
A host loads on a thread of its own and is driven here only once it is active.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, cast

import structlog

from .shard import Reply, Request, send_replies

if TYPE_CHECKING:
    from .host import ShardHost

log = structlog.get_logger(__name__)

ATTACH: Final = object()  # a host finished loading: drive it from now on
_CLOSE: Final = object()


class TurnReplies:
    """A reply sink that holds the replies of one processor turn and sends them together.

    Many shards answering the same connection in one turn then cost one hand-over to
    the listener, not one per shard. Replies from any other thread go out at once.
    """

    def __init__(self, processor: ShardProcessor) -> None:
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
        turns: dict[int, tuple[ShardHost, list[object]]] = {}
        for host, event in batch:
            key = id(host)
            if event is ATTACH:
                self._hosts[key] = host
                turns.setdefault(key, (host, []))
            elif key in self._hosts:
                turns.setdefault(key, (host, []))[1].append(event)
            elif isinstance(event, Request):
                # The host stopped after the request was queued for it.
                host.parts.replies.send([Reply(event.ref, event.api, host.unavailable)])
        for key, host in self._hosts.items():
            if key not in turns and host.wait_s() <= 0:
                turns[key] = (host, [])  # a timer is due
        for key, (host, events) in turns.items():
            failure: Exception | None = None
            try:
                alive = host.step(events)
            except Exception as exc:
                alive, failure = False, host._failure_of(exc)
            if not alive:
                del self._hosts[key]
                host._finish(failure)

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
