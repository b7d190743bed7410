"""OffsetCommit's and Heartbeat's binary bodies (api version 1), with OffsetCommit's reply.

A request's bounds are mostly the encoding's own (an int32 field cannot hold more, a
string is at most 32,767 bytes), and the rest are checked here as :mod:`.types`
declares them for JSON, with the same answers.

Requests decode into the plain classes below, which mypyc compiles, not into pydantic
models: building the model was most of a JSON decode's cost. Handlers take either
through the protocols :class:`OffsetCommitRequest` and :class:`HeartbeatRequest`.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import Final, Protocol

from . import group_api as g
from .binary_codec import I32, Reader, nullable, out_of_range, string
from .types import RETENTION_MS_MAX

__all__ = [
    "BinaryCommitPartition",
    "BinaryCommitTopic",
    "BinaryHeartbeat",
    "BinaryOffsetCommit",
    "CommitPartitionRequest",
    "CommitTopicRequest",
    "HeartbeatRequest",
    "OffsetCommitRequest",
    "decode_heartbeat",
    "decode_offset_commit",
    "decode_offset_commit_response",
    "encode_heartbeat",
    "encode_offset_commit",
    "encode_offset_commit_response",
]

_HEAD: Final = Struct(">iq")  # generation_id, retention_time_ms
_PARTITION: Final = Struct(">iqi")  # partition, offset, leader_epoch
_PARTITION_ERROR: Final = Struct(">ih")  # partition, error
_OFFSET_COMMIT: Final = "OffsetCommit"
_HEARTBEAT: Final = "Heartbeat"


# -- what a handler reads of a commit, however it was encoded ------------------------------


class CommitPartitionRequest(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def metadata(self) -> str | None: ...


class CommitTopicRequest(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[CommitPartitionRequest]: ...


class HeartbeatRequest(Protocol):
    """Who a member is in its group: what a heartbeat carries, and a commit too."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class OffsetCommitRequest(HeartbeatRequest, Protocol):
    @property
    def retention_time_ms(self) -> int: ...
    @property
    def topics(self) -> Sequence[CommitTopicRequest]: ...
    @property
    def reset(self) -> bool: ...


# -- the decoded classes -------------------------------------------------------------------


class BinaryHeartbeat:
    __slots__ = ("generation_id", "group_id", "group_instance_id", "member_id")

    def __init__(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


class BinaryCommitPartition:
    __slots__ = ("leader_epoch", "metadata", "offset", "partition")

    def __init__(self, partition: int, offset: int, leader_epoch: int, metadata: str | None):
        self.partition = partition
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata


class BinaryCommitTopic:
    __slots__ = ("name", "partitions")

    def __init__(self, name: str, partitions: list[BinaryCommitPartition]) -> None:
        self.name = name
        self.partitions = partitions


class BinaryOffsetCommit:
    __slots__ = (
        "generation_id", "group_id", "group_instance_id", "member_id", "reset",
        "retention_time_ms", "topics",
    )  # fmt: skip

    def __init__(
        self, group_id: str, topics: list[BinaryCommitTopic], *, generation_id: int,
        member_id: str, group_instance_id: str | None, retention_time_ms: int, reset: bool,
    ) -> None:  # fmt: skip
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.retention_time_ms = retention_time_ms
        self.topics = topics
        self.reset = reset


# -- reading -------------------------------------------------------------------------------


def decode_offset_commit(data: bytes) -> BinaryOffsetCommit:
    """An OffsetCommit v1 body; :class:`RequestBodyError` if it does not parse or holds
    a value beyond its bound."""
    r = Reader(data, _OFFSET_COMMIT)
    group_id = r.string("group_id")
    generation_id, retention_time_ms = _HEAD.unpack_from(data, r.take(12, "generation_id"))
    member_id = r.string("member_id")
    group_instance_id = r.nullable("group_instance_id")
    reset = r.boolean("reset")
    topics: list[BinaryCommitTopic] = []
    # The least bytes an item takes: a topic's empty name and count, a partition's
    # fixed fields and a null metadata.
    for _ in range(r.count("topics", 6)):
        name = r.string("topics.name")
        partitions: list[BinaryCommitPartition] = []
        for _ in range(r.count("topics.partitions", _PARTITION.size + 2)):
            partition, offset, leader_epoch = _PARTITION.unpack_from(
                data, r.take(_PARTITION.size, "topics.partitions")
            )
            if partition < 0:
                raise out_of_range(
                    _OFFSET_COMMIT,
                    "topics.partitions.partition",
                    f"Input should be greater than or equal to 0, not {partition}",
                )
            metadata = r.nullable("topics.partitions.metadata")
            partitions.append(
                BinaryCommitPartition(int(partition), int(offset), int(leader_epoch), metadata)
            )
        topics.append(BinaryCommitTopic(name, partitions))
    r.end()
    if retention_time_ms > RETENTION_MS_MAX:
        raise out_of_range(
            _OFFSET_COMMIT,
            "retention_time_ms",
            f"Input should be less than or equal to {RETENTION_MS_MAX}, not {retention_time_ms}",
        )
    return BinaryOffsetCommit(
        group_id, topics, generation_id=int(generation_id), member_id=member_id,
        group_instance_id=group_instance_id, retention_time_ms=int(retention_time_ms),
        reset=reset,
    )  # fmt: skip


def decode_heartbeat(data: bytes) -> BinaryHeartbeat:
    """A Heartbeat v1 body; :class:`RequestBodyError` if it does not parse."""
    r = Reader(data, _HEARTBEAT)
    group_id = r.string("group_id")
    generation_id = r.int32("generation_id")
    member_id = r.string("member_id")
    group_instance_id = r.nullable("group_instance_id")
    r.end()
    return BinaryHeartbeat(group_id, generation_id, member_id, group_instance_id)


# -- writing -------------------------------------------------------------------------------


def encode_offset_commit(body: OffsetCommitRequest) -> bytes:
    """The v1 body of a commit (a client's side)."""
    parts = [
        string(body.group_id),
        _HEAD.pack(body.generation_id, body.retention_time_ms),
        string(body.member_id),
        nullable(body.group_instance_id),
        b"\x01" if body.reset else b"\x00",
        I32.pack(len(body.topics)),
    ]
    for topic in body.topics:
        parts.append(string(topic.name))
        parts.append(I32.pack(len(topic.partitions)))
        for p in topic.partitions:
            parts.append(_PARTITION.pack(p.partition, p.offset, p.leader_epoch))
            parts.append(nullable(p.metadata))
    return b"".join(parts)


def encode_heartbeat(body: HeartbeatRequest) -> bytes:
    """The v1 body of a heartbeat (a client's side); its response's body is empty."""
    return b"".join((
        string(body.group_id), I32.pack(body.generation_id), string(body.member_id),
        nullable(body.group_instance_id),
    ))  # fmt: skip


def encode_offset_commit_response(body: g.OffsetCommitResponse) -> bytes:
    """The v1 body of a commit's response (the daemon's side)."""
    parts = [I32.pack(len(body.topics))]
    for topic in body.topics:
        parts.append(string(topic.name))
        parts.append(I32.pack(len(topic.partitions)))
        for p in topic.partitions:
            parts.append(_PARTITION_ERROR.pack(p.partition, int(p.error)))
    return b"".join(parts)


# Decoded responses by their bytes: a consumer commits the same shape over and over, and
# gets the same bytes back. Bodies are frozen, so one instance serves every such reply.
_DECODED: Final[dict[bytes, g.OffsetCommitResponse]] = {}
_DECODED_MAX: Final = 1024


def decode_offset_commit_response(data: bytes) -> g.OffsetCommitResponse:
    """A v1 response body, as the JSON one decodes (a client's side)."""
    decoded = _DECODED.get(data)
    if decoded is None:
        decoded = _decode_offset_commit_response(data)
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[data] = decoded
    return decoded


def _decode_offset_commit_response(data: bytes) -> g.OffsetCommitResponse:
    r = Reader(data, "OffsetCommitResponse")
    topics: list[dict[str, object]] = []
    for _ in range(r.count("topics", 6)):
        name = r.string("topics.name")
        partitions: list[dict[str, object]] = []
        for _ in range(r.count("topics.partitions", _PARTITION_ERROR.size)):
            partition, error = _PARTITION_ERROR.unpack_from(
                data, r.take(_PARTITION_ERROR.size, "topics.partitions")
            )
            partitions.append({"partition": partition, "error": error})
        topics.append({"name": name, "partitions": partitions})
    r.end()
    # One validation of the whole tree in pydantic-core: cheaper than a model per item.
    return g.OffsetCommitResponse.model_validate({"topics": topics})
