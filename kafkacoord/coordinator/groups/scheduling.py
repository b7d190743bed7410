"""The group shard's timers: their keys, and firing them the way Kafka's timer does.

Keys:

- ``("heartbeat", group, member)``: session expiry of a member or of a pending member (and
  the new-member join timeout while a new member's first JoinGroup is parked);
- ``("join", group)``: the rebalance timeout, or the initial delayed join of an Empty group;
- ``("sync", group)``: the pending-sync timeout (members that got a JoinGroup response but
  never sent SyncGroup);
- ``("expire-offsets",)``: the periodic offsets expiration;
- ``("cg-session", group, member)`` and ``("cg-rebalance", group, member)``: a consumer
  group member's session and rebalance timeouts (:mod:`.consumer.coordinator`).

Every schedule and cancel made while an :class:`~.undo.UndoLog` scope is open records the
deadline it replaced, so a request or timer that fails puts the deadlines back.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final

from kafkacoord.coordinator.runtime.shard import Result, encode_records
from kafkacoord.coordinator.runtime.timers import TimerRetries, Timers

from .undo import UndoLog

__all__ = [
    "EXPIRATION_TIMER",
    "ShardTimers",
    "heartbeat_timer",
    "join_timer",
    "sync_timer",
]

EXPIRATION_TIMER: Final = ("expire-offsets",)

# Bounds one fire() call if timers keep rescheduling at the same instant.
_MAX_ROUNDS: Final = 1_000


def heartbeat_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def join_timer(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_timer(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


class ShardTimers:
    """:class:`Timers` plus two rules: a due timer that an earlier timer of the same batch
    rescheduled or cancelled does not fire (Kafka's timer cancels the old task), and every
    change made inside an undo scope can be undone."""

    def __init__(self, undo: UndoLog) -> None:
        self._timers = Timers()
        self._retries = TimerRetries()
        self._undo = undo
        # While a batch fires: the keys scheduled or cancelled meanwhile.
        self._touched: set[Hashable] | None = None

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        undo = self._undo
        if undo.open:
            undo.record(self._put_back, key, self._timers.deadline(key))
        self._timers.schedule(key, deadline_ms)
        if self._touched is not None:
            self._touched.add(key)

    def cancel(self, key: Hashable) -> None:
        undo = self._undo
        if undo.open:
            deadline = self._timers.deadline(key)
            if deadline is not None:
                undo.record(self._put_back, key, deadline)
        self._timers.cancel(key)
        if self._touched is not None:
            self._touched.add(key)

    def _put_back(self, key: Hashable, deadline_ms: int | None) -> None:
        if deadline_ms is None:
            self._timers.cancel(key)
        else:
            self._timers.schedule(key, deadline_ms)

    def deadline(self, key: Hashable) -> int | None:
        return self._timers.deadline(key)

    def next_deadline(self) -> int | None:
        return self._timers.next_deadline()

    def clear(self) -> None:
        self._timers.clear()
        self._retries.clear()

    def snapshot(self) -> dict[Hashable, int]:
        """Every deadline by key (a copy)."""
        return self._timers.snapshot()

    def fire(self, now_ms: int, handler: Callable[[Hashable], Result]) -> Result:
        """Run ``handler`` for every key due at ``now_ms``, earliest first.

        Each key runs alone, in an undo scope, as each of Kafka's timers is an event of its
        own: one that throws (or returns a record that cannot be encoded) has its changes
        undone, is logged, and is tried again after a backoff; the others fire as usual.
        One that keeps failing is dropped, so the shard serves on.
        """
        result = Result()
        undo = self._undo
        for _ in range(_MAX_ROUNDS):
            due = self._timers.pop_due(now_ms)
            if not due:
                break
            touched: set[Hashable] = set()
            self._touched = touched
            try:
                for key in due:
                    if key in touched:
                        continue
                    seen = set(touched)
                    undo.begin()
                    try:
                        part = handler(key)
                        encode_records(part.records)
                    except Exception as exc:
                        undo.rollback()
                        # What it rescheduled or cancelled is undone: those keys fire as due.
                        touched &= seen
                        self._retries.retry_or_drop(
                            self._timers.schedule, key, now_ms, exc, "group"
                        )
                        continue
                    except BaseException:
                        undo.rollback()  # no scope is left open
                        raise
                    undo.commit()
                    self._retries.succeeded(key)
                    result.extend(part)
            finally:
                self._touched = None
        return result
