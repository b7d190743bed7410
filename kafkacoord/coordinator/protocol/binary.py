"""Binary bodies of the steady group APIs, OffsetCommit and Heartbeat, at api version 1.

Kafka's own encoding: big-endian integers, a string as an int16 length and its UTF-8
(length -1: null), an array as an int32 count and its items, a boolean as one byte.
A request's bounds are mostly the encoding's own (an int32 field cannot hold more,
a string is at most 32,767 bytes), and the rest are checked here as :mod:`.types`
declares them for JSON, with the same answers: a body that does not parse is
malformed (the connection closes), a value beyond its bound is refused alone.

Requests decode into the plain classes below, which mypyc compiles, not into pydantic
models: building the model was most of a JSON decode's cost. Handlers take either
through the protocols :class:`OffsetCommitRequest` and friends. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import Final, Protocol, TypeVar, cast

from . import group_api as g
from .apis import ApiSpec, RequestBodyError, decode_request, encode_body
from .base import Body, Empty
from .errors import ErrorCode
from .types import LIST_MAX, RETENTION_MS_MAX

__all__ = [
    "BINARY_BODIES",
    "BINARY_VERSION",
    "BinaryCommitPartition",
    "BinaryCommitTopic",
    "BinaryHeartbeat",
    "BinaryOffsetCommit",
    "CommitPartitionRequest",
    "CommitTopicRequest",
    "HeartbeatRequest",
    "OffsetCommitRequest",
    "RequestBody",
    "decode_body",
    "decode_heartbeat",
    "decode_offset_commit",
    "decode_offset_commit_response",
    "encode_heartbeat",
    "encode_offset_commit",
    "encode_offset_commit_response",
    "encode_reply_body",
]

BINARY_VERSION: Final = 1
"""The api version whose bodies are binary; version 0 is JSON."""

_I8: Final = Struct(">b")
_I16: Final = Struct(">h")
_I32: Final = Struct(">i")
_I64: Final = Struct(">q")
_HEAD: Final = Struct(">iq")  # generation_id, retention_time_ms
_PARTITION: Final = Struct(">iqi")  # partition, offset, leader_epoch
_PARTITION_ERROR: Final = Struct(">ih")  # partition, error
_NULL: Final = _I16.pack(-1)
_STRING_MAX: Final = 32_767
_OFFSET_COMMIT: Final = "OffsetCommit"
_HEARTBEAT: Final = "Heartbeat"
_EMPTY: Final = Empty()


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


def _malformed(api: str, message: str) -> RequestBodyError:
    return RequestBodyError(
        ErrorCode.INVALID_REQUEST, f"malformed {api} body: {message}", malformed=True
    )


def _out_of_range(api: str, field: str, message: str) -> RequestBodyError:
    return RequestBodyError(ErrorCode.INVALID_REQUEST, f"{api} {field}: {message}", malformed=False)


class _Reader:
    """A cursor over one body; every read checks the bytes are there."""

    __slots__ = ("api", "buf", "pos")

    def __init__(self, buf: bytes, api: str) -> None:
        self.buf = buf
        self.api = api
        self.pos = 0

    def take(self, size: int, field: str) -> int:
        """The position of ``size`` bytes of ``field``, now consumed."""
        pos = self.pos
        if pos + size > len(self.buf):
            raise _malformed(self.api, f"{field}: the body ends inside it")
        self.pos = pos + size
        return pos

    def nullable(self, field: str) -> str | None:
        length = int(_I16.unpack_from(self.buf, self.take(2, field))[0])
        if length < 0:
            if length == -1:
                return None
            raise _malformed(self.api, f"{field}: string length {length}")
        start = self.take(length, field)
        try:
            return self.buf[start : start + length].decode()
        except UnicodeDecodeError as exc:
            raise _malformed(self.api, f"{field}: not UTF-8 ({exc.reason})") from None

    def string(self, field: str) -> str:
        value = self.nullable(field)
        if value is None:
            raise _malformed(self.api, f"{field}: null where a string is required")
        return value

    def count(self, field: str, item_bytes: int) -> int:
        """An array's count: within LIST_MAX, and no more items than bytes can hold."""
        n = int(_I32.unpack_from(self.buf, self.take(4, field))[0])
        if n < 0:
            raise _malformed(self.api, f"{field}: array count {n}")
        if n > LIST_MAX:
            raise _out_of_range(
                self.api, field, f"List should have at most {LIST_MAX} items, not {n}"
            )
        if n * item_bytes > len(self.buf) - self.pos:
            raise _malformed(self.api, f"{field}: {n} items cannot fit in what is left of the body")
        return n

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise _malformed(self.api, f"{len(self.buf) - self.pos} bytes after the body")

    def int32(self, field: str) -> int:
        return int(_I32.unpack_from(self.buf, self.take(4, field))[0])

    def boolean(self, field: str) -> bool:
        value = int(_I8.unpack_from(self.buf, self.take(1, field))[0])
        if value not in {0, 1}:
            raise _malformed(self.api, f"{field}: boolean byte {value}")
        return value == 1


def decode_offset_commit(data: bytes) -> BinaryOffsetCommit:
    """An OffsetCommit v1 body; :class:`RequestBodyError` if it does not parse or holds
    a value beyond its bound."""
    r = _Reader(data, _OFFSET_COMMIT)
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
                raise _out_of_range(
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
        raise _out_of_range(
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
    r = _Reader(data, _HEARTBEAT)
    group_id = r.string("group_id")
    generation_id = r.int32("generation_id")
    member_id = r.string("member_id")
    group_instance_id = r.nullable("group_instance_id")
    r.end()
    return BinaryHeartbeat(group_id, generation_id, member_id, group_instance_id)


# -- writing -------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    data = value.encode()
    if len(data) > _STRING_MAX:
        raise ValueError(f"a string of {len(data)} UTF-8 bytes does not fit a Kafka STRING")
    return _I16.pack(len(data)) + data


def _nullable(value: str | None) -> bytes:
    return _NULL if value is None else _string(value)


def encode_offset_commit(body: OffsetCommitRequest) -> bytes:
    """The v1 body of a commit (a client's side)."""
    parts = [
        _string(body.group_id),
        _HEAD.pack(body.generation_id, body.retention_time_ms),
        _string(body.member_id),
        _nullable(body.group_instance_id),
        b"\x01" if body.reset else b"\x00",
        _I32.pack(len(body.topics)),
    ]
    for topic in body.topics:
        parts.append(_string(topic.name))
        parts.append(_I32.pack(len(topic.partitions)))
        for p in topic.partitions:
            parts.append(_PARTITION.pack(p.partition, p.offset, p.leader_epoch))
            parts.append(_nullable(p.metadata))
    return b"".join(parts)


def encode_heartbeat(body: HeartbeatRequest) -> bytes:
    """The v1 body of a heartbeat (a client's side); its response's body is empty."""
    return b"".join((
        _string(body.group_id), _I32.pack(body.generation_id), _string(body.member_id),
        _nullable(body.group_instance_id),
    ))  # fmt: skip


def encode_offset_commit_response(body: g.OffsetCommitResponse) -> bytes:
    """The v1 body of a commit's response (the daemon's side)."""
    parts = [_I32.pack(len(body.topics))]
    for topic in body.topics:
        parts.append(_string(topic.name))
        parts.append(_I32.pack(len(topic.partitions)))
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
    r = _Reader(data, "OffsetCommitResponse")
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


# -- by version ------------------------------------------------------------------------------

RequestBody = Body | BinaryOffsetCommit | BinaryHeartbeat
"""A request's decoded body: a pydantic model (JSON, version 0) or a binary one's class."""

BINARY_BODIES: Final[dict[str, type]] = {
    _OFFSET_COMMIT: BinaryOffsetCommit,
    _HEARTBEAT: BinaryHeartbeat,
}
"""The class a version 1 body of each API decodes into."""


def decode_body(spec: ApiSpec, version: int, data: bytes) -> RequestBody:
    """A request body of ``spec`` at ``version`` (within ``spec.max_version``)."""
    if version >= BINARY_VERSION:
        if spec.name == _OFFSET_COMMIT:
            return decode_offset_commit(data)
        if spec.name == _HEARTBEAT:
            return decode_heartbeat(data)
    return decode_request(spec, data)


def encode_reply_body(version: int, body: Body) -> bytes:
    """A reply's body as its request's version encodes it."""
    if version >= BINARY_VERSION:
        if isinstance(body, g.OffsetCommitResponse):
            return encode_offset_commit_response(body)
        if isinstance(body, Empty):
            return b""
    return encode_body(body)


B = TypeVar("B", bound=Body)


def encode_request_body(version: int, body: Body) -> bytes:
    """A request's body at ``version`` (a client's side)."""
    if version >= BINARY_VERSION:
        if isinstance(body, g.OffsetCommit):
            return encode_offset_commit(body)
        if isinstance(body, g.Heartbeat):
            return encode_heartbeat(body)
    return encode_body(body)


def decode_reply_body(version: int, response: type[B], data: bytes) -> B:
    """A reply's body to a request sent at ``version`` (a client's side)."""
    if version >= BINARY_VERSION:
        if response is g.OffsetCommitResponse:
            return cast("B", decode_offset_commit_response(data))
        if response is Empty:
            if data:
                raise _malformed("Empty", f"{len(data)} bytes after the body")
            return cast("B", _EMPTY)
    return response.model_validate_json(data)
