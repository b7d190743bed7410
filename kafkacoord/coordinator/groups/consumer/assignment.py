"""Assignments as the consumer group state machine holds them: topic → partitions.

Records and responses carry sorted ``(topic, [partitions])`` lists; in memory an
assignment is a plain mapping of frozensets so set algebra stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Final

from kafkacoord.codecs.models import TopicPartitions

__all__ = [
    "EMPTY",
    "Assignment",
    "from_lists",
    "from_records",
    "is_subset",
    "partitions_of",
    "to_lists",
    "to_records",
]

Assignment = Mapping[str, frozenset[int]]
"""A member's partitions by topic (Kafka's ``Assignment`` of the consumer group model): a
target assignment, what a member is assigned, or what it has yet to revoke."""
EMPTY: Final[Assignment] = MappingProxyType({})


def from_lists(items: Iterable[tuple[str, Iterable[int]]]) -> Assignment:
    """Merge (topic, partitions) pairs; empty topics are dropped."""
    merged: dict[str, set[int]] = {}
    for topic, partitions in items:
        merged.setdefault(topic, set()).update(partitions)
    return {t: frozenset(ps) for t, ps in merged.items() if ps}


def from_records(items: Iterable[TopicPartitions]) -> Assignment:
    return from_lists((i.topic, i.partitions) for i in items)


def to_lists(assignment: Assignment) -> list[tuple[str, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(assignment.items()) if ps]


def to_records(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in to_lists(assignment))


def partitions_of(assignment: Assignment) -> Iterator[tuple[str, int]]:
    for topic, partitions in assignment.items():
        for partition in partitions:
            yield topic, partition


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Whether a member owns nothing beyond ``assigned`` (``None``: not reported)."""
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())
