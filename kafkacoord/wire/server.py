"""The daemon's listener: one asyncio loop on its own thread, many pipelined connections.

The loop only cuts frames and writes bytes. Every request is handed to the
``handler`` on the loop thread, which must not block (the daemon's handler puts it
on a shard's queue). Replies come back from any thread through
:meth:`ServerConnection.send`, which hands the bytes to the loop in one call per
batch. A connection with too many requests unanswered stops being read until
replies catch up, the way Kafka's ``queued.max.requests`` pushes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import structlog

from kafkacoord.loops import new_event_loop

from .frames import (
    DEFAULT_MAX_FRAME_BYTES,
    INVALID_REQUEST,
    FrameError,
    FrameReader,
    RequestHeader,
    encode_response,
)
from .frames import decode_request as decode_request_frame

log = structlog.get_logger(__name__)

# Takes the frames one read produced, in order: a handler can hand them over together.
Frames = list[tuple[RequestHeader, bytes]]
Handler = Callable[[Frames, "ServerConnection"], None]


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """Per-listener limits; each mirrors a Kafka broker setting."""

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes
    max_inflight_per_connection: int = 1000  # queued.max.requests, per connection here
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    max_connections: int = 10_000  # max.connections


@dataclass(slots=True)
class ListenerStats:
    connections: int = 0
    accepted: int = 0
    refused: int = 0
    requests: int = 0
    bad_frames: dict[str, int] = field(default_factory=dict)

    def bad(self, reason: str) -> None:
        self.bad_frames[reason] = self.bad_frames.get(reason, 0) + 1


class ServerConnection(asyncio.Protocol):
    """One client connection. ``send`` and ``close_after`` are safe from any thread."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.id = next(listener.ids)
        self.peer = "?"
        self.principal: str | None = None
        # Free for the request handler: it keeps its per-connection reply channel here.
        self.attachment: Any = None
        self.inflight = 0
        self.last_active = time.monotonic()
        self._transport: asyncio.Transport | None = None
        self._reader = FrameReader(listener.limits.max_frame_bytes)
        # Frames read but not handed over: the connection is at its in-flight limit.
        self._backlog: deque[bytes] = deque()
        self._paused = False
        self._closed = False

    # -- asyncio callbacks (loop thread) ----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.principal = principal_of(transport.get_extra_info("peercert"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(6, 1, 1)  # TCP_NODELAY: replies are small and latency-bound
        if not self.listener.admit(self):
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        closed_here = self._closed  # a bad frame was counted already when we closed
        self._closed = True
        if self._reader.pending and not closed_here:
            self.listener.stats.bad("closed mid-frame")
            log.info("connection closed mid-frame", peer=self.peer,
                     pending_bytes=self._reader.pending)  # fmt: skip
        self.listener.forget(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        try:
            self._backlog.extend(self._reader.feed(data))
        except FrameError as exc:
            self._bad_frame("oversize frame", str(exc), exc.header)
            return
        self._drain()

    def _drain(self) -> None:
        """Hand over read frames while under the in-flight limit; stop reading beyond it."""
        limit = self.listener.limits.max_inflight_per_connection
        backlog = self._backlog
        frames: Frames = []
        while backlog and self.inflight + len(frames) < limit:
            try:
                frames.append(decode_request_frame(backlog.popleft()))
            except FrameError as exc:
                # What came before it is still served; the connection closes after.
                self._hand_over(frames)
                self._bad_frame("undecodable header", str(exc), None)
                return
        self._hand_over(frames)
        if self._closed:
            return
        transport = self._transport
        assert transport is not None
        if (backlog or self.inflight >= limit) and not self._paused:
            self._paused = True
            transport.pause_reading()
        elif self._paused and not backlog and self.inflight < max(limit // 2, 1):
            self._paused = False
            transport.resume_reading()

    def _hand_over(self, frames: Frames) -> None:
        if not frames:
            return
        self.inflight += len(frames)
        self.listener.stats.requests += len(frames)
        try:
            self.listener.handler(frames, self)
        except Exception:  # a handler bug must not take the listener down
            log.exception("request handler failed; closing connection", peer=self.peer)
            self._close_now()

    @property
    def closed(self) -> bool:
        return self._closed

    def _bad_frame(self, reason: str, detail: str, header: RequestHeader | None) -> None:
        self.listener.stats.bad(reason)
        log.info("bad frame; closing connection", peer=self.peer, reason=reason, detail=detail)
        if header is not None:
            self._write(encode_response(header.correlation_id, INVALID_REQUEST, detail, b""), 0)
        self._close_now()

    # -- replies (any thread) -----------------------------------------------------------

    def send(self, data: bytes, answered: int) -> None:
        """Write encoded response frames that answer ``answered`` requests."""
        loop = self.listener.loop
        if loop is None or self._closed:
            return
        if threading.get_ident() == self.listener.thread_id:
            self._write(data, answered)
        else:
            loop.call_soon_threadsafe(self._write, data, answered)

    def reject(self, header: RequestHeader, code: int, message: str, *, close: bool) -> None:
        """Answer a request with an error from the loop thread; maybe close afterwards."""
        self._write(encode_response(header.correlation_id, code, message, b""), 1)
        if close:
            self._close_now()

    def _write(self, data: bytes, answered: int) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        transport.write(data)
        self.inflight -= answered
        self.last_active = time.monotonic()
        if self._paused:
            self._drain()

    def _close_now(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()  # flushes what was written first

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
        self.ids = itertools.count(1)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread_id: int | None = None
        self.tls = ssl_context is not None
        self._ssl = ssl_context
        self._advertised = advertised
        self._connections: dict[int, ServerConnection] = {}
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="listener", daemon=True)

    @property
    def endpoint(self) -> str:
        """``host:port`` bound (the real port when 0 was asked for)."""
        return f"{self.host}:{self.port}"

    @property
    def advertised(self) -> str:
        return self._advertised or self.endpoint

    def start(self, timeout_s: float = 10.0) -> Listener:
        self._thread.start()
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
                    ssl=self._ssl,
                    reuse_address=True,
                    backlog=1024,
                )
            )
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        reaper = loop.create_task(self._reap_idle())
        try:
            loop.run_forever()
        finally:
            reaper.cancel()
            self._server.close()
            for conn in list(self._connections.values()):
                conn._close_now()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _reap_idle(self) -> None:
        idle_s = self.limits.connections_max_idle_ms / 1000
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 10.0))
            cutoff = time.monotonic() - idle_s
            for conn in list(self._connections.values()):
                if conn.inflight <= 0 and conn.last_active < cutoff:
                    log.info("closing idle connection", peer=conn.peer)
                    conn._close_now()

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
        self._connections.pop(conn.id, None)
        self.stats.connections = len(self._connections)

    def close(self) -> None:
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)
