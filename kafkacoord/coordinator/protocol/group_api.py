"""Bodies of the classic group protocol (``__kc_group_requests``).

Field names follow Kafka's JoinGroup/SyncGroup/... request and response schemas, so
the semantics (generation -1 for standalone commits, empty member id on first join)
carry over unchanged.
"""

from __future__ import annotations

from pydantic import Field

from .base import Body
from .errors import ErrorCode


class GroupRequest(Body):
    """Every group request names its group: it decides the shard (partition_for)."""

    group_id: str


class JoinProtocol(Body):
    name: str
    metadata: bytes


class JoinGroup(GroupRequest):
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str
    protocols: list[JoinProtocol] = Field(min_length=1)
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None


class JoinMember(Body):
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes


class JoinGroupResponse(Body):
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinMember] = Field(default_factory=list)
    skip_assignment: bool = False


class SyncAssignment(Body):
    member_id: str
    assignment: bytes


class SyncGroup(GroupRequest):
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: list[SyncAssignment] = Field(default_factory=list)


class SyncGroupResponse(Body):
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class Heartbeat(GroupRequest):
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


class MemberIdentity(Body):
    member_id: str = ""
    group_instance_id: str | None = None
    reason: str | None = None


class LeaveGroup(GroupRequest):
    members: list[MemberIdentity] = Field(min_length=1)


class MemberResult(Body):
    member_id: str
    group_instance_id: str | None = None
    error: ErrorCode = ErrorCode.NONE


class LeaveGroupResponse(Body):
    members: list[MemberResult]


class CommitPartition(Body):
    partition: int = Field(ge=0)
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class CommitTopic(Body):
    name: str
    partitions: list[CommitPartition]


class OffsetCommit(GroupRequest):
    # -1 and "" for a standalone (simple) consumer or an admin reset.
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    topics: list[CommitTopic]


class PartitionError(Body):
    partition: int
    error: ErrorCode = ErrorCode.NONE


class TopicErrors(Body):
    name: str
    partitions: list[PartitionError]


class OffsetCommitResponse(Body):
    topics: list[TopicErrors]


class FetchTopic(Body):
    name: str
    partitions: list[int]


class OffsetFetch(GroupRequest):
    # None fetches every committed offset of the group.
    topics: list[FetchTopic] | None = None
    require_stable: bool = False


class FetchedPartition(Body):
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1
    error: ErrorCode = ErrorCode.NONE


class FetchedTopic(Body):
    name: str
    partitions: list[FetchedPartition]


class OffsetFetchResponse(Body):
    topics: list[FetchedTopic]


class OffsetDelete(GroupRequest):
    topics: list[FetchTopic]


class OffsetDeleteResponse(Body):
    topics: list[TopicErrors]


class ListGroups(Body):
    """Sent to every shard; each answers for its own groups."""

    states_filter: list[str] = Field(default_factory=list)


class ListedGroup(Body):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # KIP-848's ListGroups v5: "classic" or "consumer"


class ListGroupsResponse(Body):
    groups: list[ListedGroup]


class DescribeGroups(Body):
    groups: list[str] = Field(min_length=1)


class DescribedMember(Body):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class DescribedGroup(Body):
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    state: str
    protocol_type: str
    protocol: str
    generation: int = -1
    leader: str | None = None
    members: list[DescribedMember] = Field(default_factory=list)


class DescribeGroupsResponse(Body):
    groups: list[DescribedGroup]


class DeleteGroups(Body):
    groups: list[str] = Field(min_length=1)


class GroupResult(Body):
    group_id: str
    error: ErrorCode = ErrorCode.NONE


class DeleteGroupsResponse(Body):
    results: list[GroupResult]


# ---------------------------------------------------------------- KIP-848 consumer groups


class HeartbeatTopicPartitions(Body):
    topic: str
    partitions: list[int]


class ConsumerGroupHeartbeat(GroupRequest):
    """Kafka's ConsumerGroupHeartbeat (API 68). A field left ``None`` is unchanged since the
    member's last heartbeat; a full request (joining, or after an error) sets them all."""

    member_id: str
    # 0 joins, -1 leaves, -2 is a static member leaving for a while.
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list[HeartbeatTopicPartitions] | None = None
    client_id: str = ""
    client_host: str = ""


class ConsumerGroupHeartbeatResponse(Body):
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # None: unchanged since the last response.
    assignment: list[HeartbeatTopicPartitions] | None = None


class ConsumerGroupHint(Body):
    """Pushed down a member's connection (beyond Kafka): its target changed or partitions
    it waits for were released, so it should heartbeat now rather than at its interval."""

    group_id: str
    member_id: str
    group_epoch: int


class ConsumerGroupDescribe(Body):
    """Kafka's ConsumerGroupDescribe (API 69)."""

    group_ids: list[str] = Field(min_length=1)


class DescribedConsumerMember(Body):
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None = None
    state: str
    assignment: list[HeartbeatTopicPartitions]
    target_assignment: list[HeartbeatTopicPartitions]


class DescribedConsumerGroup(Body):
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[DescribedConsumerMember] = Field(default_factory=list)


class ConsumerGroupDescribeResponse(Body):
    groups: list[DescribedConsumerGroup]
