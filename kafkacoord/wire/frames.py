"""Frames on a kafkacoord connection, in the shape of Kafka's own protocol.

Every frame is a 4-byte big-endian size, then a header, then the body.

- Request header: api key (int16), api version (int16), correlation id (int32),
  shard (int32: the ``__kc_offsets`` partition a group call is for, -1 otherwise)
  and client id (int16 length + UTF-8).
- Response header: correlation id (int32), error code (int16) and error message
  (int16 length + UTF-8, -1 for none). A negative correlation id marks a push: a frame
  the daemon sends without a request (clients number their requests from 0 up).

The body is the API's JSON document (see :mod:`..protocol.base`). The layer knows
nothing of APIs: it moves headers and bytes.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

SIZE: Final = struct.Struct(">i")
_REQUEST: Final = struct.Struct(">hhiih")
_RESPONSE: Final = struct.Struct(">ihh")
NO_SHARD: Final = -1
DEFAULT_MAX_FRAME_BYTES: Final = 1024 * 1024
# Kafka's INVALID_REQUEST: what a frame this layer cannot read is answered with.
INVALID_REQUEST: Final = 42


class FrameError(Exception):
    """A frame that cannot be read. ``header`` is set when the header itself was fine."""

    def __init__(self, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class RequestHeader(NamedTuple):
    """Tuples: every request makes one, at under half a frozen dataclass's cost."""

    api_key: int
    api_version: int
    correlation_id: int
    shard: int
    client_id: str


class ResponseFrame(NamedTuple):
    correlation_id: int
    error_code: int
    message: str | None
    body: bytes


def encode_request(header: RequestHeader, body: bytes) -> bytes:
    client = header.client_id.encode()
    head = _REQUEST.pack(
        header.api_key, header.api_version, header.correlation_id, header.shard, len(client)
    )
    return SIZE.pack(len(head) + len(client) + len(body)) + head + client + body


def decode_request(payload: bytes) -> tuple[RequestHeader, bytes]:
    """Split a request payload (the frame without its size) into header and body."""
    if len(payload) < _REQUEST.size:
        raise FrameError(f"request header needs {_REQUEST.size} bytes, got {len(payload)}")
    api_key, version, correlation_id, shard, client_len = _REQUEST.unpack_from(payload)
    end = _REQUEST.size + client_len
    if client_len < 0 or end > len(payload):
        raise FrameError(f"client id length {client_len} runs past the frame")
    try:
        client_id = payload[_REQUEST.size : end].decode()
    except UnicodeDecodeError as exc:
        raise FrameError("client id is not UTF-8") from exc
    return RequestHeader(api_key, version, correlation_id, shard, client_id), payload[end:]


def peek_request_header(prefix: bytes) -> RequestHeader | None:
    """The header at the start of a frame too large to read whole, if it is there."""
    try:
        header, _ = decode_request(prefix)
    except FrameError:
        return None
    return header


def encode_response(
    correlation_id: int, error_code: int, message: str | None, body: bytes
) -> bytes:
    text = b"" if message is None else message.encode()[:32767]
    head = _RESPONSE.pack(correlation_id, error_code, -1 if message is None else len(text))
    return SIZE.pack(len(head) + len(text) + len(body)) + head + text + body


def decode_response(payload: bytes) -> ResponseFrame:
    if len(payload) < _RESPONSE.size:
        raise FrameError(f"response header needs {_RESPONSE.size} bytes, got {len(payload)}")
    correlation_id, error_code, message_len = _RESPONSE.unpack_from(payload)
    start = _RESPONSE.size
    message = None
    if message_len >= 0:
        end = start + message_len
        if end > len(payload):
            raise FrameError(f"error message length {message_len} runs past the frame")
        message = payload[start:end].decode(errors="replace")
        start = end
    return ResponseFrame(correlation_id, error_code, message, payload[start:])


class FrameReader:
    """Cuts a byte stream into frame payloads; rejects a frame over ``max_bytes`` early.

    Frames it may not hand out yet (``limit``) stay in its buffer, uncut, until the next
    ``feed``: the buffer is then the connection's whole backlog, counted in ``pending``.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        # Bytes held back (an attribute, not a property: it is read on every feed).
        self.pending = 0

    def feed(self, data: bytes, limit: int = 1 << 62) -> list[bytes]:
        """Append ``data``; cut and return at most ``limit`` whole frames from the front."""
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= 4 and len(frames) < limit:
            (size,) = SIZE.unpack_from(buffer, start)
            if size < 0 or size > self.max_bytes:
                header = peek_request_header(bytes(buffer[start + 4 : start + 4 + 256]))
                del buffer[:start]
                self.pending = len(buffer)
                raise FrameError(
                    f"frame of {size} bytes exceeds max_frame_bytes={self.max_bytes}", header
                )
            if end - start - 4 < size:
                break
            frames.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]  # O(1) at a bytearray's front
        self.pending = len(buffer)
        return frames

    def ready(self) -> bool:
        """A whole frame, or one too large to read, waits at the front."""
        buffer = self._buffer
        if len(buffer) < 4:
            return False
        size: int = SIZE.unpack_from(buffer, 0)[0]
        return size < 0 or size > self.max_bytes or len(buffer) - 4 >= size

    def partial(self) -> int:
        """Bytes of the incomplete frame at the end, after any whole ones."""
        buffer = self._buffer
        start, end = 0, len(buffer)
        while end - start >= 4:
            (size,) = SIZE.unpack_from(buffer, start)
            if size < 0 or end - start - 4 < size:
                break
            start += 4 + size
        return end - start
