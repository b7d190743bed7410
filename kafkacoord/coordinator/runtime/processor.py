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
from typing import TYPE_CHECKING, Final

import structlog

from .shard import Reply, Request

if TYPE_CHECKING:
    from .host import ShardHost

log = structlog.get_logger(__name__)

ATTACH: Final = object()  # a host finished loading: drive it from now on
_CLOSE: Final = object()


class ShardProcessor:
    def __init__(self, name: str = "shards", *, max_batch: int = 5000) -> None:
        self.name = name
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[ShardHost | None, object]] = queue.SimpleQueue()
        self._hosts: dict[int, ShardHost] = {}
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, host: ShardHost, event: object) -> None:
        self._queue.put((host, event))

    def on_its_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            timeout = min((h.wait_s() for h in self._hosts.values()), default=0.5)
            try:
                first = self._queue.get(timeout=timeout)
            except queue.Empty:
                first = None
            batch = [] if first is None else [first]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(event is _CLOSE for _, event in batch):
                return
            self._turn(batch)

    def _turn(self, batch: list[tuple[ShardHost | None, object]]) -> None:
        turns: dict[int, tuple[ShardHost, list[object]]] = {}
        for host, event in batch:
            assert host is not None
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
