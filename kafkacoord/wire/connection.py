"""The client end of one connection: pipelined requests, replies matched by correlation id.

Callers write their frame straight onto the socket under a lock (no thread hop on
the way out); one reader thread cuts the replies and completes each caller's
future. A connection that breaks fails every call in flight with
:class:`ConnectionLostError`, which callers treat as retriable.

A connection closed with calls in flight is reset, not closed: a request that TCP is
still retransmitting (the network is cut) is discarded, never delivered when the cut
heals. Otherwise a commit the client gave up on could land after its later ones.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future

import structlog

from .frames import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    FrameReader,
    RequestHeader,
    ResponseFrame,
    decode_response,
    encode_request,
)

log = structlog.get_logger(__name__)

# SO_LINGER on with a zero timeout: close() sends RST and drops unsent data.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


class ConnectionLostError(ConnectionError):
    """The connection broke (or never opened); the call may be retried elsewhere."""


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"endpoint {endpoint!r} is not host:port")
    return host.strip("[]"), int(port)


class Connection:
    """One client connection to a daemon: pipelined requests, answered by correlation id."""

    def __init__(
        self,
        endpoint: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_s: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES * 16,
        on_push: Callable[[ResponseFrame], None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        # Frames the daemon sends unasked (negative correlation ids), on the reader thread.
        self._on_push = on_push
        host, port = split_endpoint(endpoint)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionLostError(f"cannot connect to {endpoint}: {exc}") from exc
        self.tls = ssl_context is not None
        # An SSL object must not read and write at once: with TLS both share one lock
        # and the reader only reads what select() says has arrived.
        sock.settimeout(1.0 if self.tls else None)
        self._sock = sock
        self._send_lock = threading.Lock()
        self._recv_lock = self._send_lock if self.tls else threading.Lock()
        self._pending: dict[int, Future[ResponseFrame]] = {}
        self._pending_lock = threading.Lock()
        self._reader = FrameReader(max_frame_bytes)
        self.closed = False
        self.error: str | None = None
        self._thread = threading.Thread(
            target=self._read_loop, name=f"conn-{endpoint}", daemon=True
        )
        self._thread.start()

    @property
    def inflight(self) -> int:
        return len(self._pending)

    def send(self, header: RequestHeader, body: bytes) -> Future[ResponseFrame]:
        """Write one request; the future completes with its response frame."""
        future: Future[ResponseFrame] = Future()
        frame = encode_request(header, body)
        with self._pending_lock:
            if self.closed:
                raise ConnectionLostError(f"connection to {self.endpoint} is closed: {self.error}")
            self._pending[header.correlation_id] = future
        try:
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError as exc:
            self._fail(f"send failed: {exc}")
        return future

    def abandon(self, correlation_id: int) -> None:
        """The caller gave up on this call: reset the connection, so that its request can
        never reach the daemon later. The other calls in flight fail as lost (retriable)."""
        with self._pending_lock:
            self._pending.pop(correlation_id, None)
        self._fail(f"call {correlation_id} abandoned", reset=True)

    def _read_loop(self) -> None:
        sock = self._sock
        try:
            while not self.closed:
                if self.tls and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                    readable, _, _ = select.select([sock], [], [], 0.5)
                    if not readable:
                        continue
                try:
                    with self._recv_lock:
                        data = sock.recv(262_144)
                except TimeoutError:
                    continue  # a TLS record that held no reply data; nothing was lost
                if not data:
                    self._fail("closed by the server")
                    return
                for payload in self._reader.feed(data):
                    self._complete(decode_response(payload))
        except (OSError, FrameError, ValueError) as exc:
            self._fail(f"read failed: {exc}")

    def _complete(self, response: ResponseFrame) -> None:
        if response.correlation_id < 0:
            if self._on_push is not None:
                try:
                    self._on_push(response)
                except Exception:  # a push is a hint: never let it break the connection
                    log.exception("push handler failed", endpoint=self.endpoint)
            return
        with self._pending_lock:
            future = self._pending.pop(response.correlation_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _fail(self, reason: str, *, reset: bool = False) -> None:
        with self._pending_lock:
            if self.closed:
                return
            self.closed = True
            self.error = reason
            pending, self._pending = self._pending, {}
        if pending:
            log.info("connection lost", endpoint=self.endpoint, reason=reason,
                     inflight=len(pending))  # fmt: skip
        if pending or reset:
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
        with contextlib.suppress(OSError):
            # SHUT_RD wakes the reader thread without queueing a FIN behind unsent data.
            self._sock.shutdown(socket.SHUT_RD if pending or reset else socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        error = ConnectionLostError(f"connection to {self.endpoint} lost: {reason}")
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        self._fail("closed by the client")
        if self._thread is not threading.current_thread():
            self._thread.join(2)
