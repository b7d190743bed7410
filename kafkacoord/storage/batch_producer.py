"""An idempotent ``acks=all`` producer whose unit is a batch, not a record.

A group shard appends whole batches and needs one outcome per batch: its base offset
(the fencing check wants every offset) or the error that lost it. librdkafka reports
every record through a Python callback on its delivery thread, and sends one produce
request per partition; at peak those per-record reports and hand-overs cost more
daemon CPU than the rest of a commit. This producer speaks the two Kafka APIs it
needs (:mod:`.produce_wire`) on one event loop (:class:`IoLoop`: a thread of its own,
or a loop another component runs; the daemon's group shards share the listener's):

- Every batch queued for a broker while a request to it is in flight goes into the
  next request: one produce request for every partition (group commit without a
  linger), each partition's batches merged into one record batch as long as it stays
  under :data:`~kafkacoord.codecs.batch_size.MAX_BATCH_BYTES`; the rest wait for the
  next request, so that batches the broker takes one by one are not refused together.
- Sequence numbers make the broker drop a duplicate and refuse a gap, as with any
  idempotent producer. There are no retries: an append that failed, or whose
  outcome is unknown, fails its partition for good in this session (later appends
  to it fail at once), and the caller opens a new session (a new producer id) to
  write again. A lost connection fails the whole session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from confluent_kafka import KafkaException

from kafkacoord.codecs.batch_size import MAX_RECORDS_BYTES, records_bytes
from kafkacoord.loops import new_event_loop
from kafkacoord.threads import spawn

from . import produce_wire as wire
from .clients import admin_client
from .errors import AppendError
from .kafka_config import client_config_of
from .sasl import SaslError, authenticate

log = structlog.get_logger(__name__)

T = TypeVar("T")
TopicPartition = tuple[str, int]
# Called once on the producer's thread: the batch's base offset, or the error that lost it.
BatchDone = Callable[[int, AppendError | None], None]

_MAX_SEQUENCE = 2**31 - 1
# Kafka error codes a caller may retry (with a new session): leadership moved, too few
# replicas, a timeout, a storage hiccup.
_RETRIABLE = {3, 5, 6, 7, 8, 13, 14, 15, 19, 20, 56}


def produce_error(code: int, where: str) -> AppendError:
    return AppendError(f"{where}: broker error {code}", retriable=code in _RETRIABLE)


class IoLoop:
    """The event loop of the producer's connections: on a thread of its own, or one
    that another component runs (:meth:`running`)."""

    def __init__(
        self,
        name: str,
        running: tuple[asyncio.AbstractEventLoop, int] | None = None,
    ) -> None:
        self._runner: threading.Thread | None
        if running is None:
            self.loop = new_event_loop()
            self._runner = spawn(name, self.loop.run_forever)
            self._thread_id = self._runner.ident
        else:
            (self.loop, self._thread_id), self._runner = running, None

    @classmethod
    def running(cls, loop: asyncio.AbstractEventLoop, thread_id: int) -> IoLoop:
        """A loop already running on thread ``thread_id``, which its owner stops."""
        return cls("", (loop, thread_id))

    def on_its_thread(self) -> bool:
        return threading.get_ident() == self._thread_id

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the loop and wait for it (never from the loop's own thread)."""
        if self.on_its_thread():
            coro.close()
            raise RuntimeError("a producer call cannot wait on its own event loop's thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    async def _cancel_tasks(self) -> None:
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def post(self, callback: Callable[[], None]) -> None:
        if self.on_its_thread():
            self.loop.call_soon(callback)
        else:
            self.loop.call_soon_threadsafe(callback)

    def close(self) -> None:
        """Stop the loop if it is this object's own."""
        if self._runner is None:
            return
        with contextlib.suppress(Exception):  # a loop that is stuck is left to the exit
            self.call(self._cancel_tasks(), 5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._runner.join(5)
        if not self._runner.is_alive():
            self.loop.close()


@dataclass(slots=True)
class SessionStats:
    """What a session sent: appends merge into batches, batches into requests."""

    appends: int = 0
    batches: int = 0
    requests: int = 0


@dataclass(slots=True)
class _Append:
    partition: TopicPartition
    records: Sequence[wire.RawRecord]
    headers: Sequence[wire.Header]
    done: BatchDone


@dataclass(slots=True)
class _Request:
    # Per partition: the appends merged into its record batch, each with its first index.
    parts: dict[TopicPartition, list[tuple[_Append, int]]]
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _Connection:
    node: int
    endpoint: str
    transport: asyncio.Transport
    waiting: deque[_Append] = field(default_factory=deque)
    inflight: dict[int, _Request] = field(default_factory=dict)
    closed: bool = False  # closed by the session: its loss is no failure

    def close(self) -> None:
        self.closed = True
        self.transport.close()


class _ResponseReader(asyncio.Protocol):
    """Splits a broker connection's bytes into response frames, on the loop's thread.

    A protocol rather than a stream reader: a response then costs one callback, not
    a task's step, futures and a copy per ``readexactly``. While a connection
    authenticates, its frames and its loss go to a queue instead (:meth:`divert`).
    """

    def __init__(
        self,
        on_response: Callable[[bytes], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self._on_response = on_response
        self._on_lost = on_lost
        self._buffer = bytearray()
        self._diverted: tuple[Callable[[bytes], None], Callable[[str], None]] | None = None
        self.lost_reason = ""

    def divert(self) -> asyncio.Queue[bytes | None]:
        """Frames into a queue until :meth:`restore`; a loss puts None there."""
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._diverted = (self._on_response, self._on_lost)
        self._on_response = queue.put_nowait

        def lost(reason: str) -> None:
            self.lost_reason = reason
            queue.put_nowait(None)

        self._on_lost = lost
        return queue

    def restore(self) -> None:
        if self._diverted is not None:
            self._on_response, self._on_lost = self._diverted
            self._diverted = None

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start, end = 0, len(buffer)
        while end - start >= 4:
            size = int.from_bytes(buffer[start : start + 4])
            if end - start - 4 < size:
                break
            self._on_response(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        del buffer[:start]

    def eof_received(self) -> bool:
        return False  # close: a broker does not half-close a connection it serves

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(repr(exc) if exc is not None else "closed by the broker")


class ProducerSession:
    """One producer id, its connections and its sequence numbers.

    Thread-safe for callers; its work runs on ``io``'s loop and every ``done`` is
    called there.
    """

    def __init__(
        self,
        io: IoLoop,
        bootstrap: str,
        client_id: str,
        *,
        timeout_s: float = 30.0,
        max_inflight: int = 1,
    ) -> None:
        self._io = io
        self._loop = io.loop
        self._client_id = client_id.encode()
        self._timeout_s = timeout_s
        self._timeout_ms = int(timeout_s * 1000)
        self._max_inflight = max_inflight
        self._admin = admin_client(bootstrap, f"{client_id}-metadata")
        self._bootstrap = bootstrap
        security = client_config_of(bootstrap)
        self._tls = None if security is None else security.ssl_context()
        self._sasl = None if security is None else security.sasl
        if security is not None and security.mechanism is not None and self._sasl is None:
            raise AppendError(
                f"the batch producer speaks SASL/PLAIN and SCRAM, not {security.mechanism}",
                retriable=False,
            )
        self._endpoints: dict[int, str] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._connections: dict[int, _Connection] = {}
        self._sequences: dict[TopicPartition, int] = {}
        self._broken: dict[TopicPartition, AppendError] = {}
        self._failure: AppendError | None = None
        self._retiring = False
        self._correlation = 0
        self._lock = threading.Lock()
        self._queue: deque[_Append] = deque()
        self._scheduled = False
        self.stats = SessionStats()
        self.identity = self._init_producer_id()

    @property
    def healthy(self) -> bool:
        """No partition of this session failed: it may take new writers."""
        return self._failure is None and not self._broken

    @property
    def retired(self) -> bool:
        """Retired, and every connection closed: nothing of it is left to report."""
        return self._retiring and not self._connections

    # -- set-up, on the caller's thread ------------------------------------------------

    def _metadata(self, topic: str | None) -> Any:
        try:
            return self._admin.list_topics(topic, timeout=self._timeout_s)
        except KafkaException as exc:
            raise AppendError(f"metadata from {self._bootstrap}: {exc}", retriable=True) from exc

    def _learn(self, metadata: Any) -> None:
        for node, broker in metadata.brokers.items():
            self._endpoints[node] = f"{broker.host}:{broker.port}"

    def _init_producer_id(self) -> wire.ProducerIdentity:
        self._learn(self._metadata(None))
        if not self._endpoints:
            raise AppendError(f"no broker in the metadata of {self._bootstrap}", retriable=True)
        node = min(self._endpoints)
        return self._io.call(self._init_on(node), self._timeout_s + 5)

    async def _init_on(self, node: int) -> wire.ProducerIdentity:
        """A new producer id; a broker still loading its id manager is asked again."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            response = await self._call(
                node, wire.INIT_PRODUCER_ID, wire.INIT_PRODUCER_ID_VERSION,
                wire.init_producer_id_request(self._timeout_ms), flexible=True,
            )  # fmt: skip
            error, identity = wire.init_producer_id_response(response)
            if not error:
                return identity
            failure = produce_error(error, f"InitProducerId at {self._endpoints[node]}")
            if not failure.retriable or time.monotonic() > deadline:
                raise failure
            await asyncio.sleep(0.1)

    def prepare(self, topic: str, partition: int) -> None:
        """Learn the partition's leader and connect to it; blocks the caller."""
        key = (topic, partition)
        if key not in self._leaders:
            metadata = self._metadata(topic)
            self._learn(metadata)
            described = metadata.topics.get(topic)
            leader = -1
            if described is not None and described.error is None:
                leader = getattr(described.partitions.get(partition), "leader", -1)
            if leader < 0 or leader not in self._endpoints:
                raise AppendError(f"no leader for {topic}-{partition}", retriable=True)
            self._leaders[key] = leader
        self._connect(self._leaders[key])

    def _connect(self, node: int) -> None:
        if node not in self._connections:
            self._io.call(self._open(node), self._timeout_s + 5)

    async def _open(self, node: int) -> None:
        if node in self._connections:
            return
        endpoint = self._endpoints[node]
        connection: _Connection | None = None

        def responded(response: bytes) -> None:
            assert connection is not None
            self._responded(connection, response)

        def lost(reason: str) -> None:
            if connection is not None and not connection.closed:
                self._lose(connection, f"connection to broker {endpoint} lost: {reason}")

        connection = _Connection(node, endpoint, await self._dial(endpoint, responded, lost))
        self._connections[node] = connection

    # -- appends -------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        records: Sequence[wire.RawRecord],
        headers: Sequence[wire.Header],
        done: BatchDone,
    ) -> None:
        """Queue a batch; ``done`` reports it once durable on every in-sync replica."""
        with self._lock:
            self._queue.append(_Append((topic, partition), records, headers, done))
            if self._scheduled:
                return
            self._scheduled = True
        self._io.post(self._drain)

    def _drain(self) -> None:
        with self._lock:
            appends, self._queue = self._queue, deque()
            self._scheduled = False
        touched: dict[int, _Connection] = {}
        for item in appends:
            error = self._failure or self._broken.get(item.partition)
            connection = self._connections.get(self._leaders.get(item.partition, -1))
            if error is None and connection is None:
                error = AppendError(f"{item.partition}: not prepared", retriable=True)
            if error is not None:
                item.done(-1, error)
                continue
            assert connection is not None
            connection.waiting.append(item)
            touched[connection.node] = connection
        for connection in touched.values():
            self._pump(connection)

    def _pump(self, connection: _Connection) -> None:
        """Send what waits for ``connection`` as one request, if it has room."""
        while connection.waiting and len(connection.inflight) < self._max_inflight:
            request, body = self._build(connection)
            self._correlation += 1
            correlation = self._correlation
            connection.inflight[correlation] = request
            request.timer = self._loop.call_later(
                self._timeout_s + 5, self._expired, connection, correlation
            )
            connection.transport.write(
                wire.frame(wire.PRODUCE, wire.PRODUCE_VERSION, correlation, self._client_id, body)
            )

    def _build(self, connection: _Connection) -> tuple[_Request, bytes]:
        """Every waiting append, merged per partition into one batch (Kafka takes one
        batch per partition per request); one with other headers, or with no room left
        in its partition's batch, waits for the next."""
        merged: dict[TopicPartition, list[tuple[_Append, int]]] = {}
        counts: dict[TopicPartition, int] = {}
        sizes: dict[TopicPartition, int] = {}
        later: deque[_Append] = deque()
        deferred: set[TopicPartition] = set()
        for item in connection.waiting:
            key = item.partition
            parts = merged.get(key)
            size = records_bytes(item.records)
            if key in deferred or (
                parts and (parts[0][0].headers != item.headers
                           or sizes[key] + size > MAX_RECORDS_BYTES)
            ):  # fmt: skip
                deferred.add(key)  # and everything after it, to keep the partition's order
                later.append(item)
                continue
            if parts is None:
                parts = merged[key] = []
                sizes[key] = 0
            start = counts.get(key, 0)
            parts.append((item, start))
            counts[key] = start + len(item.records)
            sizes[key] += size
        connection.waiting = later
        now_ms = int(time.time() * 1000)
        topics: dict[str, list[tuple[int, bytes]]] = {}
        for key, parts in merged.items():
            records = [r for item, _ in parts for r in item.records] if len(parts) > 1 else (
                parts[0][0].records
            )  # fmt: skip
            sequence = self._sequences.get(key, 0)
            self._sequences[key] = (sequence + len(records)) % (_MAX_SEQUENCE + 1)
            batch = wire.record_batch(self.identity, sequence, records, parts[0][0].headers, now_ms)
            topics.setdefault(key[0], []).append((key[1], batch))
        self.stats.appends += sum(len(parts) for parts in merged.values())
        self.stats.batches += len(merged)
        self.stats.requests += 1
        return _Request(merged), wire.produce_request(self._timeout_ms, topics)

    # -- responses, on the loop ----------------------------------------------------------

    async def _dial(
        self, endpoint: str, on_response: Callable[[bytes], None], on_lost: Callable[[str], None]
    ) -> asyncio.Transport:
        host, _, port = endpoint.rpartition(":")
        reader = _ResponseReader(on_response, on_lost)
        try:
            transport, _ = await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: reader, host, int(port), ssl=self._tls,
                    server_hostname=host if self._tls is not None else None,
                ),
                self._timeout_s,
            )  # fmt: skip
        except (OSError, TimeoutError) as exc:
            raise AppendError(
                f"cannot connect to broker {endpoint}: {exc}", retriable=True
            ) from exc
        if self._sasl is not None:
            await self._authenticate(transport, reader, endpoint)
        return transport

    async def _authenticate(
        self, transport: asyncio.Transport, reader: _ResponseReader, endpoint: str
    ) -> None:
        """SASL on a new connection, before it carries anything else."""
        assert self._sasl is not None
        relay = reader.divert()
        correlation = itertools.count(1)

        async def call(api: int, body: bytes) -> bytes:
            transport.write(wire.frame(api, 1, next(correlation), self._client_id, body))
            response = await asyncio.wait_for(relay.get(), self._timeout_s)
            if response is None:
                raise ConnectionError(reader.lost_reason)
            return response[4:]  # after the correlation id

        try:
            await authenticate(call, self._sasl)
        except (SaslError, TimeoutError, ConnectionError) as exc:
            transport.close()
            raise AppendError(
                f"SASL/{self._sasl.mechanism} authentication at broker {endpoint} failed: "
                f"{exc or 'no answer'}", retriable=False,
            ) from exc  # fmt: skip
        finally:
            reader.restore()

    async def _call(
        self, node: int, api: int, version: int, body: bytes, *, flexible: bool = False
    ) -> bytes:
        """One request outside the produce pipeline (set-up only), on a fresh connection."""
        endpoint = self._endpoints[node]
        answer: asyncio.Future[bytes] = self._loop.create_future()

        def responded(response: bytes) -> None:
            if not answer.done():
                answer.set_result(response)

        def lost(reason: str) -> None:
            if not answer.done():
                answer.set_exception(
                    AppendError(f"request to broker {endpoint} failed: {reason}", retriable=True)
                )

        transport = await self._dial(endpoint, responded, lost)
        try:
            transport.write(wire.frame(api, version, 0, self._client_id, body, flexible=flexible))
            return await asyncio.wait_for(answer, self._timeout_s)
        except TimeoutError as exc:
            raise AppendError(
                f"request to broker {endpoint} failed: no answer in {self._timeout_s:.0f}s",
                retriable=True,
            ) from exc
        finally:
            transport.close()

    def _responded(self, connection: _Connection, response: bytes) -> None:
        if connection.closed:
            return  # a response after the connection was given up: its appends failed
        try:
            request = connection.inflight.pop(wire.correlation_of(response), None)
            if request is None:
                raise wire.WireError("a response to no request in flight")
            outcomes = wire.produce_response(response)
        except wire.WireError as exc:
            self._lose(connection, f"connection to broker {connection.endpoint} lost: {exc!r}")
            return
        if request.timer is not None:
            request.timer.cancel()
        self._answer(request, outcomes, connection.endpoint)
        self._pump(connection)
        self._retire_if_idle()

    def _answer(
        self,
        request: _Request,
        outcomes: dict[TopicPartition, tuple[int, int]],
        endpoint: str,
    ) -> None:
        for key, parts in request.parts.items():
            code, base = outcomes.get(key, (-1, -1))
            error = self._broken.get(key)
            if error is None and code != 0:
                where = f"append to {key[0]}-{key[1]} at {endpoint}"
                error = (
                    AppendError(f"{where}: the response left the partition out", retriable=True)
                    if code == -1 else produce_error(code, where)
                )  # fmt: skip
                self._broken[key] = error
            for item, start in parts:
                item.done(-1 if error else base + start, error)

    def _expired(self, connection: _Connection, correlation: int) -> None:
        if correlation in connection.inflight:
            self._lose(connection, f"broker {connection.endpoint} did not answer in "
                                   f"{self._timeout_s + 5:.0f}s")  # fmt: skip

    def _lose(self, connection: _Connection, reason: str) -> None:
        """Everything in flight or waiting on ``connection`` fails; so does the session."""
        self._failure = self._failure or AppendError(reason, retriable=True)
        log.warning("producer session failed", reason=reason)
        if self._connections.get(connection.node) is connection:
            del self._connections[connection.node]
        connection.close()
        pending = [i for r in connection.inflight.values() for parts in r.parts.values()
                   for i, _ in parts] + list(connection.waiting)  # fmt: skip
        for request in connection.inflight.values():
            if request.timer is not None:
                request.timer.cancel()
        connection.inflight.clear()
        connection.waiting.clear()
        for item in pending:
            item.done(-1, self._failure)

    # -- closing ----------------------------------------------------------------------

    def retire(self) -> None:
        """No new writers: close the connections once nothing is in flight."""
        self._retiring = True
        self._io.post(self._retire_if_idle)

    def _retire_if_idle(self) -> None:
        if not self._retiring or self._queue:
            return
        if any(c.inflight or c.waiting for c in self._connections.values()):
            return
        for connection in list(self._connections.values()):
            self._connections.pop(connection.node, None)
            connection.close()

    def on_io_thread(self) -> bool:
        """Whether the caller runs on the thread that reports this session's batches."""
        return self._io.on_its_thread()

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait (within ``timeout_s``) for what is in flight, then close."""
        deadline = time.monotonic() + timeout_s
        self.retire()
        if self.on_io_thread():
            deadline = 0.0  # what is in flight is answered on this very thread: no wait
        while time.monotonic() < deadline and self._connections:
            time.sleep(0.01)
        for connection in list(self._connections.values()):
            self._io.post(functools.partial(self._lose, connection, "producer closed"))


__all__ = ["BatchDone", "IoLoop", "ProducerSession", "SessionStats", "produce_error"]
