"""The group shard's undo log: how to put back the soft state one request or timer changed.

Handlers change soft state before their records are durable: timer deadlines, a classic
group's members and parked requests, a consumer group member's rebalance epoch and last
heartbeat. A handler that fails must leave none of it behind
(docs/architecture.md#failed-handlers). Rather than copy that state before each request,
every change made while a scope is open records how to undo itself, as it happens; a
failure undoes them newest first, a success forgets them. A commit, which changes nothing
in memory, costs two flag flips; a heartbeat, an entry for its session deadline (and a
consumer member's, one for where it was heard). The classic group a membership request
changes in place is saved whole (:meth:`~.classic_group.ClassicGroup.save`) by
:mod:`.membership` before it changes.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, Final, TypeVar, cast

__all__ = ["UndoLog"]

_K = TypeVar("_K")
_V = TypeVar("_V")

_ABSENT: Final = object()

# An entry is a function and its two arguments: a tuple is the cheapest thing to make on
# a heartbeat's path.
_Entry = tuple[Callable[[Any, Any], object], Any, Any]


def _discard(mapping: MutableMapping[Any, Any], key: object) -> None:
    mapping.pop(key, None)


def _call(undo: Callable[[], object], _: None) -> None:
    undo()


class UndoLog:
    """Undo entries of the open scope. Outside a scope (replay, loading, unloading)
    changes are made without an entry: nothing there is put back."""

    __slots__ = ("_entries", "open")

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self.open = False

    def begin(self) -> None:
        if self.open:
            raise RuntimeError("an undo scope is already open")
        self.open = True

    def commit(self) -> None:
        """The scope succeeded: keep its changes."""
        self.open = False
        if self._entries:
            self._entries.clear()

    def rollback(self) -> None:
        """The scope failed: undo its changes, newest first."""
        self.open = False  # undoing records nothing
        entries = self._entries
        try:
            while entries:
                undo, a, b = entries.pop()
                undo(a, b)
        finally:
            entries.clear()

    def record(self, undo: Callable[[_K, _V], object], a: _K, b: _V) -> None:
        """Call ``undo(a, b)`` if the open scope fails. Callers check :attr:`open` first."""
        self._entries.append((undo, a, b))

    def add(self, undo: Callable[[], object]) -> None:
        """Call ``undo()`` if the open scope fails (nothing when no scope is open)."""
        if self.open:
            self._entries.append((_call, undo, None))

    def set(self, mapping: MutableMapping[_K, _V], key: _K, value: _V) -> None:
        """``mapping[key] = value``, undoably."""
        if self.open:
            old = mapping.get(key, _ABSENT)
            if old is _ABSENT:
                self._entries.append((_discard, mapping, key))
            else:
                self._entries.append((mapping.__setitem__, key, old))
        mapping[key] = value

    def pop(self, mapping: MutableMapping[_K, _V], key: _K) -> _V | None:
        """``mapping.pop(key, None)``, undoably."""
        old = mapping.pop(key, _ABSENT)
        if old is _ABSENT:
            return None
        if self.open:
            self._entries.append((mapping.__setitem__, key, old))
        return cast(_V, old)
