"""Bodies of the controller's requests (``__kc_controller_requests``).

Node-side APIs mirror KRaft's broker lifecycle (register, heartbeat, controlled
shutdown) and ``AlterPartition``; admin APIs mirror Kafka's admin client.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Body, TopicPartitionRef
from .errors import ErrorCode


class RegisterNode(Body):
    node_id: int = Field(ge=0)
    incarnation: str = Field(min_length=1)
    rack: str | None = None
    endpoints: dict[str, str] = Field(default_factory=dict)
    # "coordinator" marks a kafkacoord daemon: it may host group-coordinator shards.
    roles: list[str] = Field(default_factory=list)


class RegisterNodeResponse(Body):
    node_epoch: int


class NodeHeartbeat(Body):
    node_id: int = Field(ge=0)
    node_epoch: int


class NodeHeartbeatResponse(Body):
    fenced: bool
    shutting_down: bool
    controller_epoch: int


class ControlledShutdown(Body):
    node_id: int = Field(ge=0)
    node_epoch: int


class ControlledShutdownResponse(Body):
    """Partitions the node still leads: no other live ISR member could take over."""

    remaining: list[TopicPartitionRef]


class FenceNode(Body):
    """Admin: fence a node now, as if its session had expired."""

    node_id: int = Field(ge=0)


class AlterPartition(Body):
    """The leader's ISR change; stale epochs are rejected (docs/architecture.md#epochs-and-isr)."""

    node_id: int = Field(ge=0)
    node_epoch: int
    topic: str
    partition: int = Field(ge=0)
    leader_epoch: int
    partition_epoch: int
    new_isr: list[int] = Field(min_length=1)


class ReplicaStatus(Body):
    """A follower reports that it caught up with, or fell behind, its leader."""

    node_id: int = Field(ge=0)
    node_epoch: int
    topic: str
    partition: int = Field(ge=0)
    leader_epoch: int
    caught_up: bool


class PartitionStateBody(Body):
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


class CreateTopic(Body):
    name: str = Field(min_length=1, max_length=249, pattern=r"^[a-zA-Z0-9._-]+$")
    num_partitions: int = -1
    replication_factor: int = -1
    # Explicit placement: partition -> replicas (kafka-topics --replica-assignment).
    replica_assignment: dict[int, list[int]] | None = None
    configs: dict[str, str] = Field(default_factory=dict)
    # kafka-topics' --disable-rack-aware.
    rack_aware: bool = True
    validate_only: bool = False


class CreateTopicResponse(Body):
    topic_id: str
    assignment: dict[int, list[int]]


class DeleteTopic(Body):
    name: str


class CreatePartitions(Body):
    topic: str
    count: int = Field(ge=1)
    # Replicas of each new partition, in order (kafka-topics --replica-assignment).
    assignment: list[list[int]] | None = None
    validate_only: bool = False


class CreatePartitionsResponse(Body):
    assignment: dict[int, list[int]]


class ReassignmentTarget(Body):
    topic: str
    partition: int = Field(ge=0)
    # None cancels an in-flight reassignment (KIP-455).
    replicas: list[int] | None


class AlterReassignments(Body):
    reassignments: list[ReassignmentTarget] = Field(min_length=1)


class PartitionResult(Body):
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class PartitionResults(Body):
    results: list[PartitionResult]


class ElectLeaders(Body):
    election_type: Literal["preferred", "unclean"]
    # None means every partition (--all-topic-partitions).
    partitions: list[TopicPartitionRef] | None = None


class RebalanceMoveBody(Body):
    topic: str
    partition: int = Field(ge=0)
    # The replicas the plan started from: a partition that changed since is refused.
    original_replicas: list[int]
    target_replicas: list[int] = Field(min_length=1)


class StartRebalance(Body):
    """Execute a planned rebalance (``kafkacoord rebalance execute``)."""

    proposal_id: str = Field(min_length=1, max_length=64)
    goals: list[str] = Field(default_factory=list)
    remove_nodes: list[int] = Field(default_factory=list)
    moves: list[RebalanceMoveBody]
    max_concurrent_moves_per_node: int = Field(5, ge=1)
    max_concurrent_moves: int = Field(100, ge=1)
    max_concurrent_leader_moves: int = Field(1000, ge=1)


class StartRebalanceResponse(Body):
    proposal_id: str
    moves: int
    state: str


class StopRebalance(Body):
    """Cancel the queued moves of the running rebalance; in-flight ones finish."""

    proposal_id: str | None = None  # None: whichever runs


class StopRebalanceResponse(Body):
    proposal_id: str
    state: str


class AlterTopicConfigs(Body):
    """kafka-configs --alter --entity-type topics (IncrementalAlterConfigs SET/DELETE)."""

    topic: str
    set_configs: dict[str, str] = Field(default_factory=dict)
    delete_configs: list[str] = Field(default_factory=list)
    validate_only: bool = False


class AlterTopicConfigsResponse(Body):
    configs: dict[str, str]
    # Partitions whose ELR was cleared because min.insync.replicas changed (KIP-966).
    elr_cleared: int = 0
