"""Raw frames for tests: talk to a daemon's listener below every kafkacoord client."""

from __future__ import annotations

import socket
import struct
import time

from kafkacoord.wire.frames import (
    RequestHeader,
    ResponseFrame,
    decode_response,
    encode_request,
)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_response(sock: socket.socket) -> ResponseFrame:
    (size,) = struct.unpack(">i", _read_exactly(sock, 4))
    return decode_response(_read_exactly(sock, size))


def connect(endpoint: str, timeout_s: float = 10.0) -> socket.socket:
    host, _, port = endpoint.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def raw_call(
    endpoint: str, api_key: int, body: bytes, *, shard: int = 0, version: int = 0,
    correlation_id: int = 1, timeout_s: float = 10.0,
) -> ResponseFrame:  # fmt: skip
    """One well-framed request around an arbitrary body; returns the response frame."""
    with connect(endpoint, timeout_s) as sock:
        header = RequestHeader(api_key, version, correlation_id, shard, "raw-test")
        sock.sendall(encode_request(header, body))
        return read_response(sock)


def closed_by_peer(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True once the daemon closed the connection (reads EOF), False if it stays open."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False
