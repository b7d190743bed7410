"""Kafka's ``CooperativeStickyAssignor`` (protocol name ``"cooperative-sticky"``).

Computes the sticky assignment (:mod:`~kafkacoord.coordinator.groups.assignors.sticky`), then
applies Kafka's ``adjustAssignment``: a partition that is moving from one member to another is
left out of its new owner's assignment, so that the old owner revokes it first; the follow-up
rebalance then hands it over. Which partitions are moving:

- constrained path (equal subscriptions): the builder's ``partitionsTransferringOwnership``,
  i.e. partitions revoked from a previous owner (over quota) or claimed by several members in
  the same generation, that were given to a member;
- general path: Kafka's ``computePartitionsTransferringOwnership``: partitions assigned to a
  member that did not report owning them while some member that did report owning them is not
  assigned them.

Either way, a member never receives a partition that another member currently owns, unless it
reports owning that partition itself (possible only when claims conflict, where the higher
generation wins). Ownership reported for ids that are not members is ignored, as in Kafka where
the leader only sees the current members' subscriptions.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkacoord.coordinator.groups.assignors.common import (
    Assignment,
    Generations,
    OwnedPartitions,
    PartitionsPerTopic,
    Subscriptions,
    TopicPartition,
    sorted_partitions,
)
from kafkacoord.coordinator.groups.assignors.sticky import sticky_plan

__all__ = ["cooperative_sticky_assign", "partitions_to_revoke"]


def _transferring_from_ownership(
    assignment: Assignment, owned: OwnedPartitions
) -> dict[TopicPartition, str]:
    """Kafka's ``computePartitionsTransferringOwnership``."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned_set = set(owned.get(member, ()))
        assigned_set = set(assigned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = member
        revoked.update(tp for tp in owned_set if tp not in assigned_set)
    return {tp: member for tp, member in added.items() if tp in revoked}


def cooperative_sticky_assign(
    subscriptions: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
    owned: OwnedPartitions | None,
    generations: Generations | None = None,
) -> Assignment:
    """Kafka's ``CooperativeStickyAssignor.assign``.

    ``owned`` maps member id -> the partitions it owns now (``ownedPartitions`` in its
    subscription); ``generations`` maps member id -> the generation it owned them in. Lists are
    sorted by topic then partition.
    """
    owned_map: OwnedPartitions = owned or {}
    plan = sticky_plan(subscriptions, partitions_per_topic, owned_map, generations)
    normalized_owned = {
        member: [(topic, partition) for topic, partition in owned_map.get(member, ())]
        for member in subscriptions
    }
    transferring: Mapping[TopicPartition, str] = (
        plan.transferring
        if plan.transferring is not None
        else _transferring_from_ownership(plan.assignment, normalized_owned)
    )
    return {
        member: [tp for tp in partitions if transferring.get(tp) != member]
        for member, partitions in plan.assignment.items()
    }


def partitions_to_revoke(
    owned: OwnedPartitions, new_assignment: Mapping[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Per member, the owned partitions it does not keep under ``new_assignment``.

    Has an entry (possibly empty) for every member of ``owned`` or ``new_assignment``, in that
    order; lists are sorted by topic then partition.
    """
    out: dict[str, list[TopicPartition]] = {}
    for member, partitions in owned.items():
        keep = {(topic, p) for topic, p in new_assignment.get(member, ())}
        out[member] = sorted_partitions({(t, p) for t, p in partitions if (t, p) not in keep})
    for member in new_assignment:
        out.setdefault(member, [])
    return out
