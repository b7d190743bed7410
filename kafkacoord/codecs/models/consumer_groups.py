"""Records of KIP-848 consumer groups (``<prefix>offsets``), mirroring Kafka 4's
``ConsumerGroup*`` records: each key holds the whole state of what it names, and a
tombstone removes it.

Partitions are named by topic name, not topic id: topics here are the service's Kafka
topics, and a deleted and recreated topic shows up as a metadata change (its partition
count), which bumps the group epoch as Kafka's topic-id change would.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

from .base import AvroModel
from .group_causes import GroupCause

__all__ = [
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "MemberState",
    "PartitionRacks",
    "SubscribedTopic",
    "TopicPartitions",
]


@dataclass(frozen=True, slots=True)
class TopicPartitions(AvroModel):
    """Partitions of one topic, ascending."""

    topic: str
    partitions: tuple[int, ...]

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(data["topic"], tuple(data["partitions"]))


def _topic_partitions(items: list[dict[str, Any]]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions.from_avro(i) for i in items)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey(AvroModel):
    """Type tag 13: the group's epoch."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue(AvroModel):
    epoch: int
    cause: GroupCause | None = None  # v2: why the epoch was bumped; None in older records

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        cause = data.get("cause")
        return cls(data["epoch"], None if cause is None else GroupCause.from_avro(cause))


@dataclass(frozen=True, slots=True)
class PartitionRacks(AvroModel):
    partition: int
    racks: tuple[str, ...]

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(data["partition"], tuple(data["racks"]))


@dataclass(frozen=True, slots=True)
class SubscribedTopic(AvroModel):
    """A subscribed topic as the assignor last saw it."""

    topic: str
    num_partitions: int
    racks: tuple[PartitionRacks, ...] = ()

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(
            data["topic"],
            data["num_partitions"],
            tuple(PartitionRacks.from_avro(r) for r in data["racks"]),
        )


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey(AvroModel):
    """Type tag 14: the metadata of the topics the group subscribes to."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue(AvroModel):
    topics: tuple[SubscribedTopic, ...]

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(tuple(SubscribedTopic.from_avro(t) for t in data["topics"]))


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey(AvroModel):
    """Type tag 15: a member's subscription and identity."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClassicProtocol(AvroModel):
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata(AvroModel):
    """A member that still speaks the classic protocol inside a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        protocols = tuple(ClassicProtocol.from_avro(p) for p in data["supported_protocols"])
        return cls(data["session_timeout_ms"], protocols)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue(AvroModel):
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    rebalance_timeout_ms: int
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        classic = data.get("classic_member_metadata")
        return cls(
            client_id=data["client_id"],
            client_host=data["client_host"],
            subscribed_topic_names=tuple(data["subscribed_topic_names"]),
            rebalance_timeout_ms=data["rebalance_timeout_ms"],
            instance_id=data["instance_id"],
            rack_id=data["rack_id"],
            subscribed_topic_regex=data["subscribed_topic_regex"],
            server_assignor=data["server_assignor"],
            classic_member_metadata=(
                None if classic is None else ClassicMemberMetadata.from_avro(classic)
            ),
        )


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey(AvroModel):
    """Type tag 16: the epoch of the group's target assignment."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue(AvroModel):
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey(AvroModel):
    """Type tag 17: one member's target assignment."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue(AvroModel):
    partitions: tuple[TopicPartitions, ...]

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(_topic_partitions(data["partitions"]))


class MemberState(IntEnum):
    """Kafka's ``MemberState``, with its wire values."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey(AvroModel):
    """Type tag 18: where a member stands in its reconciliation."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue(AvroModel):
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]

    def to_avro(self) -> dict[str, Any]:
        data = super(ConsumerGroupCurrentMemberAssignmentValue, self).to_avro()
        data["state"] = int(self.state)
        return data

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        try:
            state = MemberState(data["state"])
        except ValueError:
            state = MemberState.UNKNOWN  # a newer writer's state: the member is fenced
        return cls(
            member_epoch=data["member_epoch"],
            previous_member_epoch=data["previous_member_epoch"],
            state=state,
            assigned_partitions=_topic_partitions(data["assigned_partitions"]),
            partitions_pending_revocation=_topic_partitions(data["partitions_pending_revocation"]),
        )
