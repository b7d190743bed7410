"""The records of a consumer group, built in one place (Kafka's
``GroupCoordinatorRecordHelpers`` for consumer groups)."""

from __future__ import annotations

from collections.abc import Iterable

from kafkacoord.codecs.models import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupCause,
    SubscribedTopic,
)
from kafkacoord.coordinator.runtime.shard import Record

from .assignment import Assignment, to_records
from .member import ConsumerMember

__all__ = [
    "epoch_record",
    "group_tombstones",
    "member_assignment_record",
    "member_cause",
    "member_metadata_record",
    "member_tombstones",
    "subscription_metadata_record",
    "target_epoch_record",
    "target_record",
]


def epoch_record(group_id: str, epoch: int, cause: GroupCause | None = None) -> Record:
    """The group's new epoch and what bumped it (informational: replay reads the epoch)."""
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, cause))


def member_cause(kind: str, member: ConsumerMember, detail: str | None = None) -> GroupCause:
    """A cause about one member: its ids and where it connects from."""
    return GroupCause(kind, member_id=member.member_id, group_instance_id=member.instance_id,
                      client_id=member.client_id or None, client_host=member.client_host or None,
                      detail=detail)  # fmt: skip


def subscription_metadata_record(group_id: str, topics: Iterable[SubscribedTopic]) -> Record:
    value = ConsumerGroupPartitionMetadataValue(tuple(sorted(topics, key=lambda t: t.topic)))
    return Record(ConsumerGroupPartitionMetadataKey(group_id), value)


def member_metadata_record(group_id: str, member: ConsumerMember) -> Record:
    key = ConsumerGroupMemberMetadataKey(group_id, member.member_id)
    return Record(key, member.metadata_value())


def member_assignment_record(group_id: str, member: ConsumerMember) -> Record:
    key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id)
    return Record(key, member.assignment_value())


def target_record(group_id: str, member_id: str, target: Assignment) -> Record:
    key = ConsumerGroupTargetAssignmentMemberKey(group_id, member_id)
    return Record(key, ConsumerGroupTargetAssignmentMemberValue(to_records(target)))


def target_epoch_record(group_id: str, epoch: int) -> Record:
    key = ConsumerGroupTargetAssignmentMetadataKey(group_id)
    return Record(key, ConsumerGroupTargetAssignmentMetadataValue(epoch))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: its assignment first, so its partitions are free when it goes."""
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Record]:
    """An empty group goes (Kafka's createGroupTombstoneRecords); the epoch record last."""
    return [
        Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), None),
        Record(ConsumerGroupPartitionMetadataKey(group_id), None),
        Record(ConsumerGroupMetadataKey(group_id), None),
    ]
