"""The records of a group shard, built in one place (Kafka's
``GroupCoordinatorRecordHelpers``).

A group's metadata record is keyed by group, an offset commit by (group, topic,
partition). Each is the whole state of its key; a tombstone deletes it. See
docs/architecture.md#topics-and-records.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkacoord.codecs.models import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.coordinator.runtime.shard import Record

from .classic_group import ClassicGroup

__all__ = [
    "group_metadata_record",
    "group_metadata_tombstone",
    "offset_commit_record",
    "offset_commit_tombstone",
    "offset_commit_value",
    "shard_leader_record",
]


def group_metadata_record(
    group: ClassicGroup, state_timestamp_ms: int, assignments: Mapping[str, bytes] | None = None
) -> Record:
    """The group's snapshot; ``assignments`` overrides the members' (the leader's new one
    at SyncGroup). The writer holds the group in memory already, so the record is
    ``in_memory``: appended, replayed only by a load."""
    return Record(
        GroupMetadataKey(group.group_id),
        group.to_record(state_timestamp_ms, assignments),
        in_memory=True,
    )


def group_metadata_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)


def offset_commit_value(
    offset: int, leader_epoch: int, metadata: str | None, now_ms: int, retention_time_ms: int
) -> OffsetCommitValue:
    """The value of one commit. A request's ``retention_time_ms`` (old clients; -1 = none)
    becomes an explicit expire timestamp, as in Kafka."""
    return OffsetCommitValue(
        offset=offset,
        metadata=metadata or "",
        commit_timestamp_ms=now_ms,
        leader_epoch=leader_epoch,
        expire_timestamp_ms=None if retention_time_ms < 0 else now_ms + retention_time_ms,
    )


def offset_commit_record(
    group_id: str, topic: str, partition: int, value: OffsetCommitValue
) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), value)


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), None)


def shard_leader_record(leader_epoch: int, node_id: int, incarnation: str, now_ms: int) -> Record:
    """The marker a shard's new leader writes first: readers drop older epochs' writes
    after it (docs/architecture.md#fencing)."""
    return Record(ShardLeaderKey(), ShardLeaderValue(leader_epoch, node_id, incarnation, now_ms))
