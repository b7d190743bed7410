"""Request and reply bodies by api version: binary at version 1 for the steady group
APIs (OffsetCommit, Heartbeat, OffsetFetch and ConsumerGroupHeartbeat), JSON otherwise.

Each API's encoding is in a module of its own (:mod:`.binary_commit`,
:mod:`.binary_fetch`, :mod:`.binary_consumer`), built of :mod:`.binary_codec`'s
primitives. A binary request decodes into a plain class that mypyc compiles; handlers
take it or the JSON model through a protocol. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final, TypeVar, cast

from . import group_api as g
from .apis import ApiSpec, decode_request, encode_body
from .base import Body, Empty
from .binary_codec import BINARY_VERSION, malformed
from .binary_commit import (
    BinaryHeartbeat,
    BinaryOffsetCommit,
    decode_heartbeat,
    decode_offset_commit,
    decode_offset_commit_response,
    encode_heartbeat,
    encode_offset_commit,
    encode_offset_commit_response,
)
from .binary_consumer import (
    BinaryConsumerHeartbeat,
    decode_consumer_heartbeat,
    decode_consumer_heartbeat_response,
    encode_consumer_heartbeat,
    encode_consumer_heartbeat_response,
)
from .binary_fetch import (
    BinaryOffsetFetch,
    decode_offset_fetch,
    decode_offset_fetch_response,
    encode_offset_fetch,
    encode_offset_fetch_response,
)

__all__ = [
    "BINARY_BODIES",
    "BINARY_VERSION",
    "RequestBody",
    "decode_body",
    "decode_reply_body",
    "encode_reply_body",
    "encode_request_body",
]

_EMPTY: Final = Empty()

RequestBody = (
    Body | BinaryOffsetCommit | BinaryHeartbeat | BinaryOffsetFetch | BinaryConsumerHeartbeat
)
"""A request's decoded body: a pydantic model (JSON, version 0) or a binary one's class."""

BINARY_BODIES: Final[dict[str, type]] = {
    "OffsetCommit": BinaryOffsetCommit,
    "Heartbeat": BinaryHeartbeat,
    "OffsetFetch": BinaryOffsetFetch,
    "ConsumerGroupHeartbeat": BinaryConsumerHeartbeat,
}
"""The class a version 1 body of each API decodes into."""


def decode_body(spec: ApiSpec, version: int, data: bytes) -> RequestBody:
    """A request body of ``spec`` at ``version`` (within ``spec.max_version``)."""
    if version >= BINARY_VERSION:
        name = spec.name
        if name == "OffsetCommit":
            return decode_offset_commit(data)
        if name == "Heartbeat":
            return decode_heartbeat(data)
        if name == "ConsumerGroupHeartbeat":
            return decode_consumer_heartbeat(data)
        if name == "OffsetFetch":
            return decode_offset_fetch(data)
    return decode_request(spec, data)


def encode_reply_body(version: int, body: Body) -> bytes:
    """A reply's body as its request's version encodes it."""
    if version >= BINARY_VERSION:
        cls = type(body)  # exact types: pydantic's isinstance runs Python code
        if cls is g.OffsetCommitResponse:
            return encode_offset_commit_response(cast(g.OffsetCommitResponse, body))
        if cls is Empty:
            return b""
        if cls is g.ConsumerGroupHeartbeatResponse:
            return encode_consumer_heartbeat_response(cast(g.ConsumerGroupHeartbeatResponse, body))
        if cls is g.OffsetFetchResponse:
            return encode_offset_fetch_response(cast(g.OffsetFetchResponse, body))
    return encode_body(body)


B = TypeVar("B", bound=Body)


def encode_request_body(version: int, body: Body) -> bytes:
    """A request's body at ``version`` (a client's side)."""
    if version >= BINARY_VERSION:
        if isinstance(body, g.OffsetCommit):
            return encode_offset_commit(body)
        if isinstance(body, g.Heartbeat):
            return encode_heartbeat(body)
        if isinstance(body, g.ConsumerGroupHeartbeat):
            return encode_consumer_heartbeat(body)
        if isinstance(body, g.OffsetFetch):
            return encode_offset_fetch(body)
    return encode_body(body)


def decode_reply_body(version: int, response: type[B], data: bytes) -> B:
    """A reply's body to a request sent at ``version`` (a client's side)."""
    if version >= BINARY_VERSION:
        if response is g.OffsetCommitResponse:
            return cast("B", decode_offset_commit_response(data))
        if response is Empty:
            if data:
                raise malformed("Empty", f"{len(data)} bytes after the body")
            return cast("B", _EMPTY)
        if response is g.ConsumerGroupHeartbeatResponse:
            return cast("B", decode_consumer_heartbeat_response(data))
        if response is g.OffsetFetchResponse:
            return cast("B", decode_offset_fetch_response(data))
    return response.model_validate_json(data)
