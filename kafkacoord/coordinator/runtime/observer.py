"""What a shard host reports as it works: the hook for metrics.

The host calls these on its processor's thread (or the thread that loads it), so an
observer must be cheap and must not block. :class:`NullObserver` is the default.
"""

from __future__ import annotations

from typing import Protocol

from kafkacoord.coordinator.protocol import ErrorCode


class HostObserver(Protocol):
    """Receives a host's load, append and reply events."""

    def loaded(self, shard: str, seconds: float, records: int) -> None:
        """The shard finished loading: time taken and keys replayed."""

    def appended(self, shard: str, records: int, seconds: float) -> None:
        """One durable append (a loop turn's batch) and how long it took."""

    def answered(self, shard: str, api: str, error: ErrorCode) -> None:
        """One reply released to a caller."""

    def restarted(self, shard: str, cause: str) -> None:
        """The shard is loaded again without moving: ``append_failed``, ``reset`` (its
        memory could not be trusted), or its owner's restart of a stopped host."""


class NullObserver:
    """Ignores every event."""

    def loaded(self, shard: str, seconds: float, records: int) -> None:
        pass

    def appended(self, shard: str, records: int, seconds: float) -> None:
        pass

    def answered(self, shard: str, api: str, error: ErrorCode) -> None:
        pass

    def restarted(self, shard: str, cause: str) -> None:
        pass


__all__ = ["HostObserver", "NullObserver"]
