"""Typed models of every record, one module per topic family."""

from .base import AvroModel
from .metadata import (
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
    RebalanceKey,
    RebalanceMove,
    RebalanceState,
    RebalanceValue,
    TopicKey,
    TopicValue,
)
from .offsets import (
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)

__all__ = [
    "AvroModel",
    "ControllerKey",
    "ControllerValue",
    "GroupMember",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "NodeKey",
    "NodeValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionKey",
    "PartitionState",
    "PartitionValue",
    "Reassignment",
    "RebalanceKey",
    "RebalanceMove",
    "RebalanceState",
    "RebalanceValue",
    "ShardLeaderKey",
    "ShardLeaderValue",
    "TopicKey",
    "TopicValue",
]
