"""A campaign's history: every call a client made and every role a process took.

Workers append JSON lines, one per finished call or observation, to a file of their own;
the campaign merges the files. Times are ``time.monotonic_ns()`` of the machine: every
network namespace shares CLOCK_MONOTONIC, and no client runs under a faked clock, so
times from different workers compare.

Kinds of line (``"kind"``):

- ``op``: a call and its outcome. ``f`` names it (``commit``, ``fetch``, ``create_topic``,
  ``delete_topic``, ``reassign``, ``elect``); ``key`` is what it acts on (``group/partition``
  for offsets); ``value`` what it wrote or read (``None`` for a fetch that found nothing);
  ``outcome`` is ``ok``, ``fail`` (certainly not applied: the daemon refused it) or
  ``unknown`` (a timeout or a lost connection: it may or may not take effect, even later);
  ``t0``/``t1`` its invocation and completion.
- ``role``: a node agent became ``leader`` or ``follower`` (or ``stopped``) of a partition,
  with the partition's ``leader_epoch`` as delivered, at ``t0``.
- ``assignment``: a group member was given ``partitions`` (``["topic/p", ...]``) with its
  ``generation`` (classic) or member ``epoch`` (consumer protocol), at ``t0``.
- ``epoch``: an observer saw a controller ``epoch`` (or another named epoch), at ``t0``.
- ``final``: the state read after every fault healed: ``key`` and ``value``, at ``t0``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["ok", "fail", "unknown"]


def now_ns() -> int:
    return time.monotonic_ns()


@dataclass(frozen=True)
class Op:
    process: str
    f: str
    key: str
    value: Any
    outcome: Outcome
    t0: int
    t1: int
    error: str = ""
    kind: str = "op"


@dataclass(frozen=True)
class Observation:
    kind: Literal["role", "assignment", "epoch", "final"]
    process: str
    t0: int
    key: str = ""
    value: Any = None
    role: str = ""
    leader_epoch: int = -1
    generation: int = -1
    epoch: int = -1
    partitions: list[str] = field(default_factory=list)


Entry = Op | Observation


@dataclass(frozen=True)
class Fault:
    """One fault window of the nemesis: injected at ``t0``, healed at ``t1``."""

    kind: str
    target: str
    t0: int
    t1: int


def to_json(entry: Entry) -> str:
    return json.dumps(asdict(entry), separators=(",", ":"))


def from_json(line: str) -> Entry:
    raw = json.loads(line)
    if raw.get("kind") == "op":
        return Op(**raw)
    return Observation(**raw)


class HistoryWriter:
    """Appends entries to one worker's file, flushed per line so a kill loses at most one."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, entry: Entry) -> None:
        self._file.write(to_json(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_history(paths: Iterable[Path]) -> list[Entry]:
    """Every entry of every file, by time; a torn last line (a killed worker) is dropped."""
    entries: list[Entry] = []
    for path in paths:
        entries.extend(_read(path))
    return sorted(entries, key=lambda e: e.t0)


def _read(path: Path) -> Iterator[Entry]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):
                yield from_json(line)
