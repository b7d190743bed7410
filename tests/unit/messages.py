"""A consumed record for pure tests: the ``confluent_kafka.Message`` accessors readers call."""

from __future__ import annotations

from typing import Any


class FakeMessage:
    def __init__(
        self,
        key: bytes | None,
        value: bytes | None,
        offset: int,
        headers: list[tuple[str, bytes]] | None = None,
        *,
        topic: str = "t",
        partition: int = 0,
        error: Any = None,
    ) -> None:
        self._key, self._value, self._offset, self._headers = key, value, offset, headers
        self._topic, self._partition, self._error = topic, partition, error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def error(self) -> Any:
        return self._error

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000 + self._offset  # (create time, ms)
