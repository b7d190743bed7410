"""Render a group member's assignment bytes for people.

Consumer-protocol groups store Kafka's ``ConsumerProtocolAssignment``:
``int16 version``, ``[topic: string(int16 length), partitions: [int32]]`` (int32
counts) and ``user_data: bytes`` (int32 length, -1 for null), big-endian. The
layout is the same for versions 0 to 3; a newer version may append fields,
which are ignored. Anything that does not parse is shown as hex.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_KNOWN_VERSION: Final = 3


class _TruncatedError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise _TruncatedError(f"wanted {size} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def i16(self) -> int:
        value: int = _I16.unpack(self.take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value


def decode_assignment(data: bytes) -> Assignment | None:
    """The assignment, or None if ``data`` is not a ConsumerProtocolAssignment."""
    reader = _Reader(data)
    try:
        version = reader.i16()
        if version < 0:
            return None
        partitions: list[tuple[str, int]] = []
        for _ in range(_count(reader)):
            topic = reader.take(reader.i16()).decode("utf-8")
            partitions.extend((topic, reader.i32()) for _ in range(_count(reader)))
        size = reader.i32()
        user_data = None if size == -1 else reader.take(size)
    except (_TruncatedError, UnicodeDecodeError):
        return None
    if reader.pos != len(data) and version <= _KNOWN_VERSION:
        return None
    return Assignment(version, tuple(partitions), user_data)


def _count(reader: _Reader) -> int:
    count = reader.i32()
    if count < 0:
        raise _TruncatedError(f"negative array length {count}")
    return count


def render(data: bytes | None) -> str:
    """``topic:0,1;other:3`` for an assignment; ``0x…`` for bytes that are not one."""
    if not data:
        return ""
    decoded = decode_assignment(data)
    if decoded is None:
        return "0x" + data.hex()
    return render_partitions(decoded.partitions)


def render_partitions(partitions: Iterable[tuple[str, int]]) -> str:
    """``topic:0,1;other:3``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = None,
                      version: int = 0) -> bytes:  # fmt: skip
    """The Kafka encoding (for tests and tools writing records by hand)."""
    out = [_I16.pack(version), _I32.pack(len(partitions))]
    for topic, ps in partitions.items():
        name = topic.encode("utf-8")
        out += [_I16.pack(len(name)), name, _I32.pack(len(ps)), *(_I32.pack(p) for p in ps)]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)
