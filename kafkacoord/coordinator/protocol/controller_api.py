"""Bodies of the controller's requests (``__kc_controller_requests``).

Node-side APIs mirror KRaft's broker lifecycle (register, heartbeat, controlled
shutdown) and ``AlterPartition``; admin APIs mirror Kafka's admin client. Request
fields are bounded by the aliases of :mod:`.types`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Body, TopicPartitionRef
from .errors import ErrorCode
from .types import (
    ClientText,
    Count32,
    FewOf,
    Int16,
    Int32,
    Int64,
    ListOf,
    NewAssignment,
    NewPartitionList,
    NewPartitions,
    NodeId,
    PartitionId,
    Replicas,
    String,
    TextMap,
    TopicName,
)

ProposalId = Annotated[str, Field(min_length=1, max_length=64)]


class RegisterNode(Body):
    node_id: NodeId
    incarnation: Annotated[String, Field(min_length=1)]
    rack: ClientText | None = None
    endpoints: TextMap = Field(default_factory=dict)
    # "coordinator" marks a kafkacoord daemon: it may host group-coordinator shards.
    roles: FewOf[ClientText] = Field(default_factory=list)


class RegisterNodeResponse(Body):
    node_epoch: int


class NodeHeartbeat(Body):
    node_id: NodeId
    node_epoch: Int64


class NodeHeartbeatResponse(Body):
    fenced: bool
    shutting_down: bool
    controller_epoch: int
    # The session the controller keeps for the node: it fences the node no sooner than this
    # long after the heartbeat arrived, so the node's lease runs this long from sending it.
    session_timeout_ms: int = -1


class ControlledShutdown(Body):
    node_id: NodeId
    node_epoch: Int64


class ControlledShutdownResponse(Body):
    """Partitions the node still leads: no other live ISR member could take over."""

    remaining: list[TopicPartitionRef]


class FenceNode(Body):
    """Admin: fence a node now, as if its session had expired."""

    node_id: NodeId


class AlterPartition(Body):
    """The leader's ISR change; stale epochs are rejected (docs/architecture.md#epochs-and-isr)."""

    node_id: NodeId
    node_epoch: Int64
    topic: TopicName
    partition: PartitionId
    leader_epoch: Int32
    partition_epoch: Int32
    new_isr: Annotated[Replicas, Field(min_length=1)]


class ReplicaStatus(Body):
    """A follower reports that it caught up with, or fell behind, its leader."""

    node_id: NodeId
    node_epoch: Int64
    topic: TopicName
    partition: PartitionId
    leader_epoch: Int32
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
    name: TopicName
    num_partitions: NewPartitions = -1
    replication_factor: Int16 = -1
    # Explicit placement: partition -> replicas (kafka-topics --replica-assignment).
    replica_assignment: NewAssignment | None = None
    configs: TextMap = Field(default_factory=dict)
    # kafka-topics' --disable-rack-aware.
    rack_aware: bool = True
    validate_only: bool = False


class CreateTopicResponse(Body):
    topic_id: str
    assignment: dict[int, list[int]]


class DeleteTopic(Body):
    name: TopicName


class CreatePartitions(Body):
    topic: TopicName
    count: Count32
    # Replicas of each new partition, in order (kafka-topics --replica-assignment).
    assignment: NewPartitionList[Replicas] | None = None
    validate_only: bool = False


class CreatePartitionsResponse(Body):
    assignment: dict[int, list[int]]


class ReassignmentTarget(Body):
    topic: TopicName
    partition: PartitionId
    # None cancels an in-flight reassignment (KIP-455).
    replicas: Replicas | None


class AlterReassignments(Body):
    reassignments: Annotated[ListOf[ReassignmentTarget], Field(min_length=1)]


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
    partitions: ListOf[TopicPartitionRef] | None = None


class RebalanceMoveBody(Body):
    topic: TopicName
    partition: PartitionId
    # The replicas the plan started from: a partition that changed since is refused.
    original_replicas: Replicas
    target_replicas: Annotated[Replicas, Field(min_length=1)]


class StartRebalance(Body):
    """Execute a planned rebalance (``kafkacoord rebalance execute``)."""

    proposal_id: ProposalId
    goals: FewOf[ClientText] = Field(default_factory=list)
    remove_nodes: ListOf[Int32] = Field(default_factory=list)
    moves: ListOf[RebalanceMoveBody]
    max_concurrent_moves_per_node: Count32 = 5
    max_concurrent_moves: Count32 = 100
    max_concurrent_leader_moves: Count32 = 1000


class StartRebalanceResponse(Body):
    proposal_id: str
    moves: int
    state: str


class StopRebalance(Body):
    """Cancel the queued moves of the running rebalance; in-flight ones finish."""

    proposal_id: Annotated[str, Field(max_length=64)] | None = None  # None: whichever runs


class StopRebalanceResponse(Body):
    proposal_id: str
    state: str


class AlterTopicConfigs(Body):
    """kafka-configs --alter --entity-type topics (IncrementalAlterConfigs SET/DELETE)."""

    topic: TopicName
    set_configs: TextMap = Field(default_factory=dict)
    delete_configs: FewOf[ClientText] = Field(default_factory=list)
    validate_only: bool = False


class DescribeTopicConfigs(Body):
    """kafka-configs --describe --all --entity-type topics (DescribeConfigs for a topic)."""

    topic: TopicName


class DescribedConfig(Body):
    name: str
    value: str
    # The controller's default for this config; None for a config it does not act on.
    default: str | None
    # Kafka's ConfigSource: DYNAMIC_TOPIC_CONFIG (the topic's override) or
    # DEFAULT_CONFIG (the controller's default).
    source: Literal["DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"]


class DescribeTopicConfigsResponse(Body):
    configs: list[DescribedConfig]


class AlterTopicConfigsResponse(Body):
    configs: dict[str, str]
    # Partitions whose ELR was cleared because min.insync.replicas changed (KIP-966).
    elr_cleared: int = 0
