"""OffsetFetch's binary bodies (api version 1): the request and its reply.

The request: group_id, topics as a nullable array (null fetches every offset of the
group) of a name and an int32 array of partitions, then require_stable. The reply:
topics, each a name and its partitions' partition, offset, leader epoch, metadata,
commit and expire timestamps and error code. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import Final, Protocol

from . import group_api as g
from .binary_codec import (
    I32,
    NULL_ARRAY,
    Reader,
    int32_array,
    nullable,
    string,
)

__all__ = [
    "BinaryFetchTopic",
    "BinaryOffsetFetch",
    "FetchTopicRequest",
    "OffsetFetchRequest",
    "decode_offset_fetch",
    "decode_offset_fetch_response",
    "encode_offset_fetch",
    "encode_offset_fetch_response",
]

_OFFSET_FETCH: Final = "OffsetFetch"
_FETCHED: Final = Struct(">iqi")  # partition, offset, leader_epoch
_FETCHED_TAIL: Final = Struct(">qqh")  # commit and expire timestamps, error


class FetchTopicRequest(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class OffsetFetchRequest(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[FetchTopicRequest] | None: ...
    @property
    def require_stable(self) -> bool: ...


class BinaryFetchTopic:
    __slots__ = ("name", "partitions")

    def __init__(self, name: str, partitions: list[int]) -> None:
        self.name = name
        self.partitions = partitions


class BinaryOffsetFetch:
    __slots__ = ("group_id", "require_stable", "topics")

    def __init__(
        self, group_id: str, topics: list[BinaryFetchTopic] | None, require_stable: bool
    ) -> None:
        self.group_id = group_id
        self.topics = topics
        self.require_stable = require_stable


def decode_offset_fetch(data: bytes) -> BinaryOffsetFetch:
    """An OffsetFetch v1 body; :class:`RequestBodyError` if it does not parse."""
    r = Reader(data, _OFFSET_FETCH)
    group_id = r.string("group_id")
    n = r.nullable_count("topics", 6)  # a topic's least: an empty name and no partitions
    topics = None
    if n >= 0:
        topics = [
            BinaryFetchTopic(r.string("topics.name"), r.int32s("topics.partitions"))
            for _ in range(n)
        ]
    require_stable = r.boolean("require_stable")
    r.end()
    return BinaryOffsetFetch(group_id, topics, require_stable)


def encode_offset_fetch(body: OffsetFetchRequest) -> bytes:
    """The v1 body of an offset fetch (a client's side)."""
    parts = [string(body.group_id)]
    if body.topics is None:
        parts.append(NULL_ARRAY)
    else:
        parts.append(I32.pack(len(body.topics)))
        for topic in body.topics:
            parts.append(string(topic.name))
            parts.append(int32_array(topic.partitions))
    parts.append(b"\x01" if body.require_stable else b"\x00")
    return b"".join(parts)


def encode_offset_fetch_response(body: g.OffsetFetchResponse) -> bytes:
    """The v1 body of an offset fetch's reply (the daemon's side)."""
    parts = [I32.pack(len(body.topics))]
    for topic in body.topics:
        parts.append(string(topic.name))
        parts.append(I32.pack(len(topic.partitions)))
        for p in topic.partitions:
            parts.append(_FETCHED.pack(p.partition, p.offset, p.leader_epoch))
            parts.append(nullable(p.metadata))
            parts.append(
                _FETCHED_TAIL.pack(p.commit_timestamp_ms, p.expire_timestamp_ms, int(p.error))
            )
    return b"".join(parts)


def decode_offset_fetch_response(data: bytes) -> g.OffsetFetchResponse:
    """A v1 reply body, as the JSON one decodes (a client's side)."""
    r = Reader(data, "OffsetFetchResponse")
    topics: list[dict[str, object]] = []
    least = _FETCHED.size + 2 + _FETCHED_TAIL.size
    for _ in range(r.count("topics", 6)):
        name = r.string("topics.name")
        partitions: list[dict[str, object]] = []
        for _ in range(r.count("topics.partitions", least)):
            partition, offset, leader_epoch = _FETCHED.unpack_from(
                data, r.take(_FETCHED.size, "topics.partitions")
            )
            metadata = r.nullable("topics.partitions.metadata")
            committed, expires, error = _FETCHED_TAIL.unpack_from(
                data, r.take(_FETCHED_TAIL.size, "topics.partitions")
            )
            partitions.append({
                "partition": partition, "offset": offset, "leader_epoch": leader_epoch,
                "metadata": metadata, "commit_timestamp_ms": committed,
                "expire_timestamp_ms": expires, "error": error,
            })  # fmt: skip
        topics.append({"name": name, "partitions": partitions})
    r.end()
    return g.OffsetFetchResponse.model_validate({"topics": topics})
