"""Where ``groups describe`` reads a group: its coordinator now, or the offsets log as of
an instant (``--as-of``). Both answer the same calls, so both print the same columns."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafkacoord.client import GroupAdmin
from kafkacoord.client.group_history import group_as_of
from kafkacoord.client.instants import format_instant
from kafkacoord.client.metadata_history import HistoryUnavailableError
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.storage.ends_at import log_end_offsets_at
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.storage.watermarks import log_end_offsets

from .as_of import parse_as_of
from .common import ExitCode, fail

TP = tuple[str, int]


class GroupReads(Protocol):
    """The group calls ``groups describe`` makes (GroupAdmin's, or a group as of then)."""

    def describe_groups(self, groups: Collection[str]) -> list[g.DescribedGroup]: ...

    def describe_consumer_groups(
        self, groups: Collection[str]
    ) -> list[g.DescribedConsumerGroup]: ...

    def committed(self, group: str) -> dict[TP, g.FetchedPartition]: ...


@dataclass(frozen=True, slots=True)
class GroupSource:
    """A group's coordinator answers, its shard, and the log ends to measure lag against."""

    reads: GroupReads
    shard: int
    ends: Callable[[Iterable[TP]], dict[TP, int]]
    instant_ms: int | None = None  # None: now

    @property
    def when(self) -> str:
        """`` at <instant>`` for messages about the past, else nothing."""
        return "" if self.instant_ms is None else f" at {format_instant(self.instant_ms)}"


def live_source(admin: GroupAdmin, servers: str, group: str) -> GroupSource:
    def ends(partitions: Iterable[TP]) -> dict[TP, int]:
        return log_end_offsets(servers, partitions)

    return GroupSource(admin, admin.channel.shard_of(group), ends)


def as_of_source(
    servers: str, topics: InternalTopics, group: str, as_of: str, warehouse: Path | None
) -> GroupSource:
    """The group at ``--as-of``, from its shard of the offsets log; exit 3 when the log
    no longer holds that instant (a warehouse has no group history to fall back on)."""
    now_ms = int(time.time() * 1000)
    instant = parse_as_of(as_of, now_ms)
    try:
        past = group_as_of(servers, topics, group, instant, now_ms)
    except HistoryUnavailableError as exc:
        also = "" if warehouse is None else f" (--warehouse {warehouse} was not used)"
        raise fail(f"{exc}{also}", ExitCode.NOT_FOUND) from None

    def ends(partitions: Iterable[TP]) -> dict[TP, int]:
        return log_end_offsets_at(servers, partitions, instant)

    return GroupSource(past, past.shard, ends, instant)
