"""Kafka's embedded consumer protocol: the Subscription and Assignment byte formats.

In the classic group protocol the coordinator treats member metadata and assignments as
opaque bytes; only clients of protocol type ``"consumer"`` give them meaning. Kafka's Java
consumer encodes them as ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``
(non-flexible Kafka message encoding, prefixed by an int16 version). kafkacoord's client
library encodes with these functions, and the coordinator decodes subscriptions to know which
topics a group consumes (OffsetDelete refuses subscribed topics, as Kafka does).

Wire format (big-endian; ``string`` = int16 length + UTF-8; arrays = int32 count; nullable
bytes = int32 length, -1 for null; nullable string = int16 length, -1 for null):

- Subscription v0: ``topics [string]``, ``user_data bytes?``;
  v1 adds ``owned_partitions [topic string, partitions [int32]]``;
  v2 adds ``generation_id int32``; v3 adds ``rack_id string?``.
- Assignment v0..v3: ``assigned_partitions [topic string, partitions [int32]]``,
  ``user_data bytes?`` (v1-v3 only changed semantics, not layout).

As in Kafka, a newer version than we know is parsed with the newest layout we know, ignoring
trailing fields: versions may only append fields.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "LATEST_VERSION",
    "PROTOCOL_TYPE",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

PROTOCOL_TYPE: Final = "consumer"
"""The JoinGroup ``protocol_type`` of Kafka consumers."""

LATEST_VERSION: Final = 3

TopicPartition = tuple[str, int]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """The bytes are not a valid consumer-protocol Subscription or Assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


# --------------------------------------------------------------------------- encoding


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, s: str) -> None:
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ConsumerProtocolError(f"string of {len(data)} bytes is too long")
        self.i16(len(data))
        self.parts.append(data)

    def nullable_string(self, s: str | None) -> None:
        if s is None:
            self.i16(-1)
        else:
            self.string(s)

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.i32(-1)
        else:
            self.i32(len(b))
            self.parts.append(b)

    def topic_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        # Kafka groups partitions by topic, topics in first-seen order.
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        self.i32(len(by_topic))
        for topic, numbers in by_topic.items():
            self.string(topic)
            self.i32(len(numbers))
            for n in numbers:
                self.i32(n)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _check_version(version: int) -> None:
    if not 0 <= version <= LATEST_VERSION:
        raise ConsumerProtocolError(f"version {version} is not in 0..{LATEST_VERSION}")


def encode_subscription(subscription: Subscription, version: int = LATEST_VERSION) -> bytes:
    """Kafka's ``ConsumerProtocol.serializeSubscription``; fields newer than ``version`` drop."""
    _check_version(version)
    w = _Writer()
    w.i16(version)
    w.i32(len(subscription.topics))
    for topic in subscription.topics:
        w.string(topic)
    w.nullable_bytes(subscription.user_data)
    if version >= 1:
        w.topic_partitions(subscription.owned_partitions)
    if version >= 2:
        w.i32(subscription.generation_id)
    if version >= 3:
        w.nullable_string(subscription.rack_id)
    return w.getvalue()


def encode_assignment(assignment: Assignment, version: int = LATEST_VERSION) -> bytes:
    """Kafka's ``ConsumerProtocol.serializeAssignment``."""
    _check_version(version)
    w = _Writer()
    w.i16(version)
    w.topic_partitions(assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return w.getvalue()


# --------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError(
                f"truncated: needs {n} bytes at offset {self.pos} of {len(self.data)}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            raise ConsumerProtocolError(f"negative array length {n}")
        return n

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ConsumerProtocolError("null where a string is required")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"string is not UTF-8: {exc}") from exc

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        self.pos -= 2
        return self.string()

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        return self._take(n)

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            out.extend((topic, self.i32()) for _ in range(self.count()))
        return tuple(out)


def _version(reader: _Reader) -> int:
    version = reader.i16()
    if version < 0:
        raise ConsumerProtocolError(f"negative consumer protocol version {version}")
    # Newer versions only append fields: read them with the newest layout we know.
    return min(version, LATEST_VERSION)


def decode_subscription(data: bytes) -> Subscription:
    """Parse Subscription bytes (any version); raises :class:`ConsumerProtocolError`."""
    r = _Reader(data)
    version = _version(r)
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned: tuple[TopicPartition, ...] = ()
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = r.topic_partitions()
    if version >= 2:
        generation_id = r.i32()
    if version >= 3:
        rack_id = r.nullable_string()
    return Subscription(topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    """Parse Assignment bytes (any version). Empty bytes are the coordinator's "no assignment"
    (Kafka's ``EMPTY_ASSIGNMENT``) and decode to an empty :class:`Assignment`."""
    if not data:
        return Assignment()
    r = _Reader(data)
    _version(r)
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes()
    return Assignment(partitions, user_data)


def assigned_partitions(data: bytes) -> list[tuple[str, int]]:
    """A member's partitions, sorted, for display: none for another protocol's payload."""
    if not data:
        return []
    try:
        return sorted(decode_assignment(data).partitions)
    except ConsumerProtocolError:
        return []
