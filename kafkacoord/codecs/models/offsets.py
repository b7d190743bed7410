"""Records of the group coordinator's shards (``__kc_offsets``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from .base import AvroModel, value_class
from .group_causes import GroupCause


@dataclass(frozen=True, slots=True)
class GroupMetadataKey(AvroModel):
    """A group's metadata key (type tag 10)."""

    group: str


@dataclass(frozen=True, slots=True)
class GroupMember(AvroModel):
    """One member in a group's snapshot (Kafka's ``MemberMetadata``)."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue(AvroModel):
    """A classic group's snapshot (Kafka's ``GroupMetadataValue``)."""

    protocol_type: str
    generation: int
    state_timestamp_ms: int
    members: tuple[GroupMember, ...]
    protocol: str | None = None
    leader: str | None = None
    cause: GroupCause | None = None  # v2; None in older records

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(
            protocol_type=data["protocol_type"],
            generation=data["generation"],
            state_timestamp_ms=data["state_timestamp_ms"],
            members=tuple(GroupMember.from_avro(m) for m in data["members"]),
            protocol=data["protocol"],
            leader=data["leader"],
            cause=None if data.get("cause") is None else GroupCause.from_avro(data["cause"]),
        )


@value_class
class OffsetCommitKey(AvroModel):
    """A committed offset's key: group, topic, partition (type tag 11)."""

    group: str
    topic: str
    partition: int


@value_class
class OffsetCommitValue(AvroModel):
    """A committed offset (Kafka's ``OffsetCommitValue``)."""

    offset: int
    metadata: str
    commit_timestamp_ms: int
    leader_epoch: int = -1
    expire_timestamp_ms: int | None = None

    def expires_at(self, retention_ms: int) -> int:
        """Explicit expiry (old clients), else commit time plus retention (KIP-211 base).

        A negative explicit expiry is Kafka's "none given" (-1), not a time.
        """
        if self.expire_timestamp_ms is not None and self.expire_timestamp_ms >= 0:
            return self.expire_timestamp_ms
        return self.commit_timestamp_ms + retention_ms


@dataclass(frozen=True, slots=True)
class ShardLeaderKey(AvroModel):
    """The one ``ShardLeader`` record's key of an offsets partition (type tag 12)."""


@dataclass(frozen=True, slots=True)
class ShardLeaderValue(AvroModel):
    """Fences a group shard: written by each new leader before it serves."""

    leader_epoch: int
    node_id: int
    incarnation: str
    activated_ms: int
