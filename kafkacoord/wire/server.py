"""The daemon's listener: one asyncio loop on its own thread, many pipelined connections.

The loop only cuts frames and writes bytes. Every request is handed to the
``handler`` on the loop thread, which must not block (the daemon's handler puts it
on a shard's queue). Replies come back from any thread through
:meth:`ServerConnection.send`, which hands the bytes to the loop in one call per
batch.

A connection stops being read, as Kafka mutes a channel, while it has
``max_inflight_per_connection`` requests unanswered (``queued.max.requests``), while
its unsent replies are over ``write_buffer_high_bytes`` (the transport's high-water
mark: its client is not reading them), or while the connections together hold more
than ``max_buffered_bytes`` and it is among the heaviest (:class:`.limits.BufferBudget`).
While a connection lives its replies are never dropped; pushes (hints) to a client
not reading are. A frame must arrive whole within ``request_read_timeout_ms`` of its
first byte, a TLS handshake within ``tls_handshake_timeout_ms`` (the handshake counts
against ``max_connections``), and a connection with nothing owed and nothing read for
``connections_max_idle_ms`` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import ssl
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, cast

import structlog

from kafkacoord.loops import new_event_loop

from .frames import INVALID_REQUEST, FrameError, FrameReader, RequestHeader, encode_response
from .frames import decode_request as decode_request_frame
from .limits import (
    IN_FLIGHT,
    MEMORY,
    WRITE_BUFFER,
    BufferBudget,
    ListenerLimits,
    ListenerStats,
    fit_to_fd_limit,
)

__all__ = ["Frames", "Handler", "Listener", "ListenerLimits", "ListenerStats", "ServedConnection",
           "ServerConnection", "principal_of"]  # fmt: skip

log = structlog.get_logger(__name__)

# Takes the frames one read produced, in order: a handler can hand them over together.
Frames = list[tuple[RequestHeader, bytes]]
Handler = Callable[[Frames, "ServedConnection"], None]


class ServedConnection(Protocol):
    """What a request handler uses of a client's connection. A protocol, not
    ``ServerConnection`` itself: compiled callers would refuse any other class, and the
    handlers are tested with stand-ins."""

    peer: str
    principal: str | None
    attachment: Any

    @property
    def closed(self) -> bool: ...

    def send(self, data: bytes, answered: int) -> None: ...

    def reject(self, header: RequestHeader, code: int, message: str, *, close: bool) -> None: ...


T = TypeVar("T")

# Unread bytes of a connection below this are left out of the budget: a frame split
# across reads would otherwise cost bookkeeping on every read (at most 4 KiB a connection).
UNCOUNTED_BYTES = 4096


def run_eagerly(
    coro: Coroutine[Any, Any, T], done: Callable[[T | None, BaseException | None], None]
) -> None:
    """Run ``coro`` up to its first wait now, then on as each future it awaits completes;
    ``done`` gets its result or its error. (A task would begin only on the next turn.)"""

    def step(_: object = None) -> None:
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            done(stop.value, None)
        except (Exception, asyncio.CancelledError) as exc:
            done(None, exc)
        else:
            if waiting is None:  # a bare yield (asyncio.sleep(0)): go on next turn
                asyncio.get_running_loop().call_soon(step)
            else:
                waiting.add_done_callback(step)

    step()


class ServerConnection(asyncio.Protocol):
    """One client connection. ``send`` and ``close`` are safe from any thread."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.id = next(listener.ids)
        self.peer = "?"
        self.principal: str | None = None
        # Free for the request handler: it keeps its per-connection reply channel here.
        self.attachment: Any = None
        self.inflight = 0
        # A frame read whole, a reply written while the client reads, a frame begun.
        self.last_active = time.monotonic()
        # Bytes held, as the listener's budget last counted them; it may hold us back.
        self.held = 0
        self.held_back = False
        self._transport: asyncio.Transport | None = None  # None until TLS is up
        self._raw: asyncio.Transport | None = None
        # Its buffer holds the frames read but not handed over (the connection may not
        # take more now) and the partial frame after them.
        self._reader = FrameReader(listener.limits.max_frame_bytes)
        self._limit = listener.limits.max_inflight_per_connection
        self._unread = 0  # the reader's bytes, as last accounted
        self._buffered = 0  # the transport's unsent bytes, as last accounted
        self._frame_started: float | None = None  # first byte of the frame in progress
        self._paused_for: str | None = None  # why it is not being read (None: it is)
        self._write_paused = False
        self._handing_over = False  # the handler runs: it may answer, not take more
        self._handshaking = False
        self._early: list[bytes] = []  # application data that came with the handshake
        self._closed = False

    # -- asyncio callbacks (loop thread) ----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._raw = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(6, 1, 1)  # TCP_NODELAY: replies are small and latency-bound
        listener = self.listener
        # Counted from the accept, handshake included: max_connections bounds open files.
        if not listener.admit(self):
            self._closed = True
            transport.close()
            return
        context = listener.ssl_context
        if context is None:
            self._serve(transport)
            return
        # TLS here rather than in create_server: the handshake is then admitted, timed
        # and counted like the connection it is.
        self._handshaking = True
        assert listener.loop is not None
        timeout_s = listener.limits.tls_handshake_timeout_ms / 1000
        handshake = listener.loop.start_tls(
            transport, self, context, server_side=True, ssl_handshake_timeout=timeout_s
        )
        # Now, not on the next turn as a task would: the transport starts reading once
        # we return, and its bytes must reach the TLS protocol, not this one.
        run_eagerly(handshake, functools.partial(self._handshaken, time.monotonic()))

    def _handshaken(
        self, started: float, tls: asyncio.Transport | None, error: BaseException | None
    ) -> None:
        listener = self.listener
        if error is not None or tls is None:
            timeout_ms = listener.limits.tls_handshake_timeout_ms
            # asyncio aborts a handshake past its deadline with ConnectionAbortedError.
            late = (time.monotonic() - started) * 1000 >= timeout_ms * 0.9
            if isinstance(error, ConnectionAbortedError) and late:
                listener.stats.handshakes_timed_out += 1
                log.info("TLS handshake timed out; closing connection", peer=self.peer,
                         timeout_ms=timeout_ms)  # fmt: skip
            else:
                listener.stats.handshakes_failed += 1
                log.info("TLS handshake failed; closing connection", peer=self.peer,
                         error=str(error) or type(error).__name__)  # fmt: skip
            self._closed = True
            if self._raw is not None:
                self._raw.abort()
            listener.forget(self)
            return
        if self._closed:  # lost right after the handshake
            return
        self._handshaking = False
        self.principal = principal_of(tls.get_extra_info("peercert"))
        self._serve(tls)
        early, self._early = self._early, []
        for data in early:
            if self._closed:
                break
            self.data_received(data)

    def _serve(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        high = self.listener.limits.write_buffer_high_bytes
        transport.set_write_buffer_limits(high=high, low=high // 4)

    def connection_lost(self, exc: Exception | None) -> None:
        closed_here = self._closed  # a bad frame was counted already when we closed
        self._closed = True
        partial = self._reader.partial() if self._reader.pending else 0
        if partial and not closed_here:
            self.listener.stats.bad("closed mid-frame")
            log.info("connection closed mid-frame", peer=self.peer,
                     pending_bytes=partial)  # fmt: skip
        self.listener.forget(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading(False)

    def resume_writing(self) -> None:
        self._write_paused = False
        self.last_active = time.monotonic()  # the client is reading its replies
        self._account_buffered()
        self._drain()

    def data_received(self, data: bytes) -> None:
        if self._handshaking:
            self._early.append(data)
            return
        reader = self._reader
        room = 0 if self._write_paused or self.held_back else self._limit - self.inflight
        try:
            payloads = reader.feed(data, room)
        except FrameError as exc:
            self._bad_frame("oversize frame", str(exc), exc.header)
            return
        if payloads:
            now = time.monotonic()
            self.last_active = now
            self._frame_started = now if reader.pending else None  # begun in this read
            self._take(payloads, room)
            return
        if self._frame_started is None:
            # A frame begun is activity; the rest of it trickling in is not.
            self._frame_started = self.last_active = time.monotonic()
        self._settle(room <= 0 and reader.ready())

    def _drain(self) -> None:
        """Hand over frames read earlier, if the connection may take them now."""
        if self._handing_over:
            return  # an answer given inside the hand-over: the caller's loop takes the rest
        reader = self._reader
        room = 0 if self._write_paused or self.held_back else self._limit - self.inflight
        if room > 0 and reader.pending:
            try:
                payloads = reader.feed(b"", room)
            except FrameError as exc:
                self._bad_frame("oversize frame", str(exc), exc.header)
                return
            if payloads:
                if not reader.pending:
                    self._frame_started = None
                self._take(payloads, room)
                return
        self._settle(room <= 0 and reader.ready())

    def _take(self, payloads: list[bytes], room: int) -> None:
        """Hand ``payloads`` over, and more while room opens: a handler may answer at once.
        The hot path: one call, whatever the read brought."""
        reader = self._reader
        listener = self.listener
        while True:
            try:
                frames = [decode_request_frame(p) for p in payloads]
            except FrameError as exc:
                self._undecodable(payloads, exc)
                return
            self.inflight += len(frames)
            listener.stats.requests += len(frames)
            self._handing_over = True
            try:
                listener.handler(frames, self)
            except Exception:  # a handler bug must not take the listener down
                log.exception("request handler failed; closing connection", peer=self.peer)
                self._close_now()
            finally:
                self._handing_over = False
            if self._closed:
                return
            if len(payloads) < room:  # the reader had no more whole frames
                break
            room = 0 if self._write_paused or self.held_back else self._limit - self.inflight
            try:
                payloads = reader.feed(b"", room) if room > 0 else []
            except FrameError as exc:
                self._bad_frame("oversize frame", str(exc), exc.header)
                return
            if not payloads:
                if not reader.pending:
                    self._frame_started = None
                self._settle(room <= 0 and reader.ready())
                return
        # _settle(False), inlined: this runs for every read.
        if (self._paused_for is not None or self.inflight >= self._limit
                or self._write_paused or self.held_back):  # fmt: skip
            self._update_reading(False)
        unread = reader.pending
        if unread < UNCOUNTED_BYTES:
            unread = 0
        if unread != self._unread:
            self._unread = unread
            listener.budget.account(self, self._buffered + unread)

    def _settle(self, backlogged: bool) -> None:
        """Read on or not; count what the connection holds."""
        if self._closed:
            return
        if (backlogged or self._paused_for is not None or self.inflight >= self._limit
                or self._write_paused or self.held_back):  # fmt: skip
            self._update_reading(backlogged)
        unread = self._reader.pending
        if unread < UNCOUNTED_BYTES:
            unread = 0  # a small frame split across reads: not worth the bookkeeping
        if unread != self._unread:
            self._unread = unread
            self.listener.budget.account(self, self._buffered + unread)

    def _undecodable(self, payloads: list[bytes], error: FrameError) -> None:
        """What came before the bad header is still served; the connection closes after."""
        good = []
        for payload in payloads:
            try:
                good.append(decode_request_frame(payload))
            except FrameError:
                break
        if good:
            self.inflight += len(good)
            self.listener.stats.requests += len(good)
            self._handing_over = True  # nothing after the bad frame may be taken
            try:
                self.listener.handler(good, self)
            except Exception:
                log.exception("request handler failed; closing connection", peer=self.peer)
            finally:
                self._handing_over = False
        self._bad_frame("undecodable header", str(error), None)

    def _update_reading(self, backlogged: bool) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        limit = self._limit
        # Stopped at the in-flight limit, it reads again at half of it (no flapping).
        if self._paused_for == IN_FLIGHT:
            limit = max(limit // 2, 1)
        reason = None
        if self._write_paused:
            reason = WRITE_BUFFER
        elif self.held_back:
            reason = MEMORY
        elif backlogged or self.inflight >= limit:
            reason = IN_FLIGHT
        was = self._paused_for
        if reason == was:
            return
        self._paused_for = reason
        stats = self.listener.stats
        if reason is None:
            transport.resume_reading()
            stats.reading_paused -= 1
            if self._frame_started is not None:
                # Its client could not send while we did not read: time the rest afresh.
                self._frame_started = time.monotonic()
            return
        if was is None:
            transport.pause_reading()
            stats.reading_paused += 1
        stats.pause(reason)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def frame_timed(self) -> bool:
        """A frame is in progress and its client is to blame if it does not come whole:
        we are reading, or holding the connection back only for the daemon's memory
        with no whole frame of its waiting on us."""
        if self._frame_started is None:
            return False
        if self._paused_for is None:
            return True
        return self._paused_for == MEMORY and not self._reader.ready()

    def _bad_frame(self, reason: str, detail: str, header: RequestHeader | None) -> None:
        self.listener.stats.bad(reason)
        log.info("bad frame; closing connection", peer=self.peer, reason=reason, detail=detail)
        if header is not None:
            self._write(encode_response(header.correlation_id, INVALID_REQUEST, detail, b""), 0)
        self._close_now()

    # -- the listener's budget (loop thread) --------------------------------------------

    def measure(self) -> int:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            self._buffered = transport.get_write_buffer_size()
        return self._buffered + self._unread

    def drained(self) -> bool:
        return self._buffered == 0

    def hold_back(self, held_back: bool) -> None:
        if held_back:
            self._update_reading(False)
        else:
            self._drain()

    def _account_buffered(self) -> None:
        transport = self._transport
        if transport is None:
            return
        buffered = transport.get_write_buffer_size()
        if buffered != self._buffered:
            self._buffered = buffered
            self.listener.budget.account(self, buffered + self._unread)

    # -- replies (any thread) -----------------------------------------------------------

    def send(self, data: bytes, answered: int) -> None:
        """Write encoded response frames that answer ``answered`` requests. Frames that
        answer none are pushes: hints, dropped while the client is not reading."""
        loop = self.listener.loop
        if loop is None or self._closed:
            return
        write = self._write if answered else self._push
        if threading.get_ident() == self.listener.thread_id:
            write(data, answered)
        else:
            loop.call_soon_threadsafe(write, data, answered)

    def reject(self, header: RequestHeader, code: int, message: str, *, close: bool) -> None:
        """Answer a request with an error from the loop thread; maybe close afterwards."""
        self._write(encode_response(header.correlation_id, code, message, b""), 1)
        if close:
            self._close_now()

    def _push(self, data: bytes, answered: int) -> None:
        if self._write_paused:
            self.listener.stats.pushes_dropped += 1
            return
        self._write(data, answered)

    def _write(self, data: bytes, answered: int) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        transport.write(data)  # over the high-water mark this calls pause_writing
        self.inflight -= answered
        buffered = transport.get_write_buffer_size()
        if buffered != self._buffered:
            self._buffered = buffered
            self.listener.budget.account(self, buffered + self._unread)
        if not self._write_paused:  # replies buffered for a client not reading are no sign of life
            self.last_active = time.monotonic()
        if self._paused_for is not None:
            self._drain()

    def _close_now(self) -> None:
        self._closed = True
        self.last_active = time.monotonic()
        transport = self._transport or self._raw
        if transport is not None:
            transport.close()  # flushes what was written first

    def _drop(self) -> None:
        """Close without flushing: what is unsent would wait for a client not reading."""
        self._closed = True
        transport = self._transport or self._raw
        if transport is None:
            return
        if transport.get_write_buffer_size():
            transport.abort()
        else:
            transport.close()

    def close(self) -> None:
        loop = self.listener.loop
        if loop is not None and not self._closed:
            loop.call_soon_threadsafe(self._close_now)


def principal_of(cert: Any) -> str | None:
    """A TLS peer's subject as Kafka names it by default: ``CN=…,OU=…``."""
    if not cert:
        return None
    names = [f"{_SHORT.get(k, k)}={v}" for rdn in cert.get("subject", ()) for k, v in rdn]
    # RFC 2253 order, most specific first, as Kafka's X500Principal.getName() gives it.
    return ",".join(reversed(names)) or None


_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
}


class Listener:
    """A daemon's asyncio TCP (optionally TLS) listener for framed requests."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        limits: ListenerLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        advertised: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.limits = limits or ListenerLimits()
        self.stats = ListenerStats()
        self.budget = BufferBudget(self.limits.max_buffered_bytes, self.stats)
        self.ids = itertools.count(1)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread_id: int | None = None
        self.tls = ssl_context is not None
        self.ssl_context = ssl_context
        self._advertised = advertised
        self._connections: dict[int, ServerConnection] = {}
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._serving = threading.Thread(target=self._run, name="listener", daemon=True)

    @property
    def endpoint(self) -> str:
        """``host:port`` bound (the real port when 0 was asked for)."""
        return f"{self.host}:{self.port}"

    @property
    def advertised(self) -> str:
        return self._advertised or self.endpoint

    def start(self, timeout_s: float = 10.0) -> Listener:
        self.limits = fit_to_fd_limit(self.limits)
        self._serving.start()
        if not self._ready.wait(timeout_s):
            raise OSError(f"listener on {self.endpoint} did not start in {timeout_s}s")
        if self._error is not None:
            raise OSError(f"cannot listen on {self.endpoint}: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = new_event_loop()
        self.loop = loop
        self.thread_id = threading.get_ident()
        try:
            self._server = loop.run_until_complete(
                loop.create_server(
                    lambda: ServerConnection(self),
                    self.host,
                    self.port,
                    reuse_address=True,
                    backlog=1024,
                )
            )
            # uvloop's `sockets` is a list where the stubs say tuple: read it untyped.
            server: Any = self._server
            self.port = server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        chores = [loop.create_task(self._reap()), loop.create_task(self._measure())]
        try:
            loop.run_forever()
        finally:
            for chore in chores:
                chore.cancel()
            self._server.close()
            for conn in list(self._connections.values()):
                conn._close_now()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _reap(self) -> None:
        """Close connections idle too long, and those whose frame did not arrive in time."""
        limits = self.limits
        idle_s = limits.connections_max_idle_ms / 1000
        read_s = limits.request_read_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(max(min(idle_s, read_s) / 4, 0.05), 10.0))
            now = time.monotonic()
            for conn in list(self._connections.values()):
                if conn._handshaking:
                    continue  # asyncio times the handshake
                if conn.closed:
                    if conn.last_active < now - idle_s:
                        conn._drop()  # closed long ago, still flushing to a client not reading
                    continue
                if conn.frame_timed:
                    # The frame's deadline, not the idle timer, governs a frame in progress.
                    assert conn._frame_started is not None
                    if now - conn._frame_started > read_s:
                        self.stats.frames_timed_out += 1
                        log.info("frame not read whole in time; closing connection",
                                 peer=conn.peer, pending_bytes=conn._reader.pending,
                                 timeout_ms=limits.request_read_timeout_ms)  # fmt: skip
                        conn._drop()
                    continue
                if conn.inflight <= 0 and conn.last_active < now - idle_s:
                    log.info("closing idle connection", peer=conn.peer)
                    conn._drop()

    async def _measure(self) -> None:
        """Write buffers drain without telling: measure them, often while memory is short."""
        budget = self.budget
        while True:
            await asyncio.sleep(0.1 if budget.pressed else 1.0)
            budget.tick()

    def admit(self, conn: ServerConnection) -> bool:
        if len(self._connections) >= self.limits.max_connections:
            self.stats.refused += 1
            log.warning("connection refused: max_connections reached", peer=conn.peer,
                        max_connections=self.limits.max_connections)  # fmt: skip
            return False
        self._connections[conn.id] = conn
        self.stats.accepted += 1
        self.stats.connections = len(self._connections)
        return True

    def forget(self, conn: ServerConnection) -> None:
        if self._connections.pop(conn.id, None) is None:
            return
        self.stats.connections = len(self._connections)
        if conn._paused_for is not None:
            conn._paused_for = None
            self.stats.reading_paused -= 1
        self.budget.forget(conn)

    def close(self) -> None:
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._serving.is_alive() and threading.current_thread() is not self._serving:
            self._serving.join(5)
