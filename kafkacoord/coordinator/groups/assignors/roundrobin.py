"""Kafka's ``RoundRobinAssignor`` (protocol name ``"roundrobin"``).

All partitions of all subscribed topics, sorted by topic (Java ``String`` order) then
partition, are dealt out one at a time to the members in ``MemberInfo`` order (static members
by ``group.instance.id`` first, then dynamic members by member id; see
:func:`~kafkacoord.coordinator.groups.assignors.range.member_info_order`) through a circular
iterator. A member not subscribed to the partition's topic is skipped (and the iterator moves
past it), exactly as Kafka's ``CircularIterator`` loop does.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.assignors.common import (
    Assignment,
    GroupInstanceIds,
    PartitionsPerTopic,
    Subscriptions,
    TopicPartition,
    finalize_assignment,
    member_topics,
    normalize_partitions_per_topic,
)
from kafkacoord.coordinator.groups.assignors.javacompat import (
    java_hashmap_order,
    java_string_key,
)
from kafkacoord.coordinator.groups.assignors.range import member_info_order
from kafkacoord.coordinator.groups.partitioning import java_string_hash

__all__ = ["roundrobin_assign"]


def roundrobin_assign(
    subscriptions: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
    *,
    group_instance_ids: GroupInstanceIds | None = None,
) -> Assignment:
    """Kafka's ``RoundRobinAssignor.assign``.

    ``group_instance_ids`` maps member id -> ``group.instance.id`` (``None`` or absent for a
    dynamic member). Lists are sorted by topic then partition.
    """
    topics_by_member = member_topics(subscriptions)
    topics = normalize_partitions_per_topic(topics_by_member, partitions_per_topic)
    java_order = java_hashmap_order(list(subscriptions), java_string_hash)
    ordered = member_info_order(java_order, group_instance_ids)
    lists: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    cursor = 0  # the member CircularIterator.peek() would return
    for topic in sorted(topics, key=java_string_key):
        for partition in range(topics[topic]):
            # Some member subscribes to every normalised topic, so this terminates.
            while topic not in topics_by_member[ordered[cursor]]:
                cursor = (cursor + 1) % len(ordered)
            lists[ordered[cursor]].append((topic, partition))
            cursor = (cursor + 1) % len(ordered)
    return finalize_assignment(subscriptions, lists)
