"""Kafka's primitive encoding, which the binary bodies (api version 1) are built of.

Big-endian integers, a string as an int16 length and its UTF-8 (length -1: null), an
array as an int32 count and its items (count -1: null), a boolean as one byte. Reading
checks every byte is there: a body that does not parse is malformed (its connection
closes), a value beyond its bound is refused alone. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import Final

from .apis import RequestBodyError
from .errors import ErrorCode
from .types import LIST_MAX

__all__ = [
    "BINARY_VERSION",
    "I16",
    "I32",
    "NULL_ARRAY",
    "Reader",
    "int32_array",
    "malformed",
    "nullable",
    "out_of_range",
    "string",
]

BINARY_VERSION: Final = 1
"""The api version whose bodies are binary; version 0 is JSON."""

_I8: Final = Struct(">b")
I16: Final = Struct(">h")
I32: Final = Struct(">i")
NULL_ARRAY: Final = I32.pack(-1)
_NULL: Final = I16.pack(-1)
_STRING_MAX: Final = 32_767


def malformed(api: str, message: str) -> RequestBodyError:
    return RequestBodyError(
        ErrorCode.INVALID_REQUEST, f"malformed {api} body: {message}", malformed=True
    )


def out_of_range(api: str, field: str, message: str) -> RequestBodyError:
    return RequestBodyError(ErrorCode.INVALID_REQUEST, f"{api} {field}: {message}", malformed=False)


class Reader:
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
            raise malformed(self.api, f"{field}: the body ends inside it")
        self.pos = pos + size
        return pos

    def nullable(self, field: str) -> str | None:
        length = int(I16.unpack_from(self.buf, self.take(2, field))[0])
        if length < 0:
            if length == -1:
                return None
            raise malformed(self.api, f"{field}: string length {length}")
        start = self.take(length, field)
        try:
            return self.buf[start : start + length].decode()
        except UnicodeDecodeError as exc:
            raise malformed(self.api, f"{field}: not UTF-8 ({exc.reason})") from None

    def string(self, field: str) -> str:
        value = self.nullable(field)
        if value is None:
            raise malformed(self.api, f"{field}: null where a string is required")
        return value

    def count(self, field: str, item_bytes: int) -> int:
        """An array's count: within LIST_MAX, and no more items than bytes can hold."""
        n = self.nullable_count(field, item_bytes)
        if n < 0:
            raise malformed(self.api, f"{field}: null where an array is required")
        return n

    def nullable_count(self, field: str, item_bytes: int) -> int:
        """As :meth:`count`, but -1 is a null array."""
        n = int(I32.unpack_from(self.buf, self.take(4, field))[0])
        if n < 0:
            if n == -1:
                return -1
            raise malformed(self.api, f"{field}: array count {n}")
        if n > LIST_MAX:
            raise out_of_range(
                self.api, field, f"List should have at most {LIST_MAX} items, not {n}"
            )
        if n * item_bytes > len(self.buf) - self.pos:
            raise malformed(self.api, f"{field}: {n} items cannot fit in what is left of the body")
        return n

    def int32s(self, field: str) -> list[int]:
        """An array of int32s."""
        n = self.count(field, 4)
        start = self.take(4 * n, field)
        return list(Struct(f">{n}i").unpack_from(self.buf, start)) if n else []

    def strings(self, field: str) -> list[str] | None:
        """A nullable array of strings."""
        n = self.nullable_count(field, 2)
        return None if n < 0 else [self.string(field) for _ in range(n)]

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise malformed(self.api, f"{len(self.buf) - self.pos} bytes after the body")

    def int32(self, field: str) -> int:
        return int(I32.unpack_from(self.buf, self.take(4, field))[0])

    def boolean(self, field: str) -> bool:
        value = int(_I8.unpack_from(self.buf, self.take(1, field))[0])
        if value not in {0, 1}:
            raise malformed(self.api, f"{field}: boolean byte {value}")
        return value == 1


def string(value: str) -> bytes:
    data = value.encode()
    if len(data) > _STRING_MAX:
        raise ValueError(f"a string of {len(data)} UTF-8 bytes does not fit a Kafka STRING")
    return I16.pack(len(data)) + data


def nullable(value: str | None) -> bytes:
    return _NULL if value is None else string(value)


def int32_array(values: Sequence[int]) -> bytes:
    return I32.pack(len(values)) + Struct(f">{len(values)}i").pack(*values)
