"""Kafka's ``RangeAssignor`` (protocol name ``"range"``), without rack awareness.

Per topic: lay out the partitions in numeric order and the subscribed members in order (see
below), give each member ``P // N`` consecutive partitions and the first ``P % N`` members one
extra. Example from Kafka's docs: members C0, C1, topics t0 and t1 with 3 partitions each give
``C0: [t0p0, t0p1, t1p0, t1p1]`` and ``C1: [t0p2, t1p2]``.

Member order is Kafka's ``AbstractPartitionAssignor.MemberInfo`` order: members with a
``group.instance.id`` (static members) first, ordered by instance id, then the others ordered by
member id (Java ``String`` order). Members comparing equal (same instance id) keep Java
``HashMap`` order, as Kafka's stable sort does.
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
from kafkacoord.coordinator.groups.partitioning import java_string_hash

__all__ = ["member_info_order", "range_assign"]


def member_info_order(
    members: list[str], group_instance_ids: GroupInstanceIds | None = None
) -> list[str]:
    """``members`` sorted like Kafka's ``MemberInfo.compareTo``.

    ``members`` is the Java iteration order to start from (the stable sort keeps it for ties).
    """
    instance_ids = group_instance_ids or {}

    def key(member: str) -> tuple[int, bytes]:
        instance_id = instance_ids.get(member)
        if instance_id is not None:
            return (0, java_string_key(instance_id))
        return (1, java_string_key(member))

    return sorted(members, key=key)


def range_assign(
    subscriptions: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
    *,
    group_instance_ids: GroupInstanceIds | None = None,
) -> Assignment:
    """Kafka's ``RangeAssignor.assign`` (non-rack-aware).

    ``group_instance_ids`` maps member id -> ``group.instance.id`` (``None`` or absent for a
    dynamic member). Lists are sorted by topic then partition (see
    :mod:`~kafkacoord.coordinator.groups.assignors.common`).
    """
    topics_by_member = member_topics(subscriptions)
    topics = normalize_partitions_per_topic(topics_by_member, partitions_per_topic)
    java_order = java_hashmap_order(list(subscriptions), java_string_hash)
    ordered = member_info_order(java_order, group_instance_ids)
    lists: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    for topic, num_partitions in topics.items():
        consumers = [m for m in ordered if topic in topics_by_member[m]]
        quota, extra = divmod(num_partitions, len(consumers))
        start = 0
        for i, member in enumerate(consumers):
            length = quota + (1 if i < extra else 0)
            lists[member].extend((topic, p) for p in range(start, start + length))
            start += length
    return finalize_assignment(subscriptions, lists)
