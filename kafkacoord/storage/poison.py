"""Poison records: the one place every skipped internal-topic record goes through.

A record that cannot be decoded (truncated Avro, an unknown record type, an
unsupported schema version, a record type that does not belong in its topic)
is counted per topic for the whole process, logged with its topic, partition
and offset, and skipped. In strict mode it is fatal instead: ``record_poison``
raises :class:`PoisonRecordError`, after telling every registered strict-failure
listener (the daemon, which then stops), because the reader that raises may run
on a background thread whose exceptions nobody waits for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from .errors import PoisonRecordError

log = structlog.get_logger(__name__)

StrictListener = Callable[[PoisonRecordError], None]

_lock = threading.Lock()
_counts: dict[str, int] = {}
_listeners: list[StrictListener] = []
_strict = False


def set_strict(enabled: bool) -> None:
    """Make poison records fatal (``True``) or counted and skipped (``False``), process-wide."""
    global _strict  # noqa: PLW0603 - one switch for the whole process, set at daemon start
    _strict = enabled


def is_strict() -> bool:
    return _strict


def add_strict_listener(listener: StrictListener) -> None:
    """Call ``listener`` with the error each time strict mode stops at a poison record."""
    with _lock:
        _listeners.append(listener)


def remove_strict_listener(listener: StrictListener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def record_poison(
    topic: str, partition: int, offset: int, reason: str, *, strict: bool | None = None
) -> None:
    """Count and log one poison record, or raise in strict mode.

    ``strict`` overrides the process-wide switch for one caller (a replay that
    was configured explicitly).
    """
    if _strict if strict is None else strict:
        error = PoisonRecordError(topic, partition, offset, reason)
        with _lock:
            listeners = list(_listeners)
        for listener in listeners:
            listener(error)
        raise error
    with _lock:
        count = _counts[topic] = _counts.get(topic, 0) + 1
    log.warning("skipped poison record", topic=topic, partition=partition, offset=offset,
                reason=reason, skipped=count)  # fmt: skip


def poison_counts() -> dict[str, int]:
    """Poison records skipped so far, per topic (a copy)."""
    with _lock:
        return dict(_counts)


def reset_poison_counts() -> None:
    """Forget the counts (tests)."""
    with _lock:
        _counts.clear()
