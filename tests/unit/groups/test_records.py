"""The group shard's record helpers: keys, whole values and tombstones."""

from __future__ import annotations

from kafkacoord.codecs.models import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.groups.classic_group import ClassicGroup
from kafkacoord.coordinator.groups.records import (
    group_metadata_record,
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
    offset_commit_value,
)
from kafkacoord.coordinator.runtime.shard import Record


def test_offset_commit_records_are_keyed_by_group_topic_and_partition() -> None:
    value = OffsetCommitValue(7, "", 1)
    assert offset_commit_record("g", "t", 3, value) == Record(OffsetCommitKey("g", "t", 3), value)
    assert offset_commit_tombstone("g", "t", 3) == Record(OffsetCommitKey("g", "t", 3), None)


def test_group_metadata_records_hold_the_groups_snapshot() -> None:
    group = ClassicGroup("g", generation=4)
    record = group_metadata_record(group, 1_000)
    assert record == Record(GroupMetadataKey("g"), group.to_record(1_000))
    assert group_metadata_tombstone("g") == Record(GroupMetadataKey("g"), None)


def test_a_requested_retention_becomes_an_explicit_expiry() -> None:
    assert offset_commit_value(5, 2, None, 1_000, -1) == OffsetCommitValue(5, "", 1_000, 2, None)
    assert offset_commit_value(5, 2, "m", 1_000, 60).expire_timestamp_ms == 1_060
