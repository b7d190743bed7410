"""Types and input normalisation shared by the assignors.

Conventions (all assignors):

- A partition is ``(topic, partition)``.
- ``subscriptions`` maps member id -> subscribed topics. Its iteration order stands for the
  order in which Kafka's group leader built its ``HashMap`` of subscriptions (the JoinGroup
  member order); it only matters for Java hash-order tie-breaking, see
  :mod:`~kafkacoord.coordinator.groups.assignors.javacompat`. Topics are treated as a set.
- ``partitions_per_topic`` maps topic -> partition count. As in Kafka's
  ``AbstractPartitionAssignor.assign``, only topics that some member subscribes to and that
  have at least one partition take part; other entries are ignored.
- The result has an entry, possibly an empty list, for every member, in ``subscriptions``
  order; each list is sorted by topic (Java ``String`` order) then partition number. Kafka's
  own lists come in algorithm order; the set of partitions per member is what matches Kafka.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from typing import TypeAlias

from kafkacoord.coordinator.groups.assignors.javacompat import java_string_key

__all__ = [
    "DEFAULT_GENERATION",
    "Assignment",
    "Generations",
    "GroupInstanceIds",
    "OwnedPartitions",
    "PartitionsPerTopic",
    "RebalanceProtocol",
    "Subscriptions",
    "TopicPartition",
    "finalize_assignment",
    "member_topics",
    "normalize_partitions_per_topic",
    "partition_sort_key",
    "sorted_partitions",
]

TopicPartition: TypeAlias = tuple[str, int]
Subscriptions: TypeAlias = Mapping[str, Collection[str]]
PartitionsPerTopic: TypeAlias = Mapping[str, int]
OwnedPartitions: TypeAlias = Mapping[str, Collection[TopicPartition]]
Generations: TypeAlias = Mapping[str, int]
GroupInstanceIds: TypeAlias = Mapping[str, str | None]
Assignment: TypeAlias = dict[str, list[TopicPartition]]

DEFAULT_GENERATION = -1
"""Kafka's ``AbstractStickyAssignor.DEFAULT_GENERATION``: the generation of a member that
reports none."""


class RebalanceProtocol(enum.IntEnum):
    """Kafka's ``ConsumerPartitionAssignor.RebalanceProtocol`` (same ids)."""

    EAGER = 0
    """Every member revokes all its partitions before the rebalance."""
    COOPERATIVE = 1
    """Members keep their partitions; only those that move are revoked, then reassigned in a
    follow-up rebalance."""


def partition_sort_key(tp: TopicPartition) -> tuple[bytes, int]:
    """Sort key: topic in Java ``String`` order, then partition number."""
    return (java_string_key(tp[0]), tp[1])


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(partitions, key=partition_sort_key)


def member_topics(subscriptions: Subscriptions) -> dict[str, frozenset[str]]:
    """Each member's subscribed topics as a set. Rejects a bare string as a subscription."""
    out: dict[str, frozenset[str]] = {}
    for member, topics in subscriptions.items():
        if isinstance(topics, str):
            raise TypeError(
                f"subscription of member {member!r} must be a collection of topic names, "
                f"not the string {topics!r}"
            )
        out[member] = frozenset(topics)
    return out


def normalize_partitions_per_topic(
    topics_by_member: Mapping[str, Collection[str]], partitions_per_topic: PartitionsPerTopic
) -> dict[str, int]:
    """The subscribed topics with at least one partition. Validates every count."""
    subscribed: set[str] = set()
    for topics in topics_by_member.values():
        subscribed.update(topics)
    out: dict[str, int] = {}
    for topic, count in partitions_per_topic.items():
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"partition count of topic {topic!r} must be an int, got {count!r}")
        if count < 0:
            raise ValueError(f"partition count of topic {topic!r} is negative: {count}")
        if count > 0 and topic in subscribed:
            out[topic] = count
    return out


def finalize_assignment(
    members: Iterable[str], lists: Mapping[str, Iterable[TopicPartition]]
) -> Assignment:
    """One sorted list per member, in ``members`` order."""
    return {member: sorted_partitions(lists.get(member, ())) for member in members}
