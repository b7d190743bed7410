"""Bodies of the classic group protocol (``__kc_group_requests``).

Field names follow Kafka's JoinGroup/SyncGroup/... request and response schemas, so
the semantics (generation -1 for standalone commits, empty member id on first join)
carry over unchanged. Request fields are bounded by the aliases of :mod:`.types`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, cast

from pydantic import Field

from .base import Body
from .errors import ErrorCode
from .types import (
    Bytes,
    ClientText,
    CommitMetadata,
    FewOf,
    GroupId,
    InstanceId,
    Int32,
    Int64,
    ListOf,
    MemberId,
    PartitionId,
    RetentionMs,
    String,
    TopicText,
)


class GroupRequest(Body):
    """Every group request names its group: it decides the shard (partition_for)."""

    group_id: GroupId


class JoinProtocol(Body):
    name: ClientText
    metadata: Bytes


class JoinGroup(GroupRequest):
    session_timeout_ms: Int32
    rebalance_timeout_ms: Int32 = -1
    member_id: MemberId = ""
    group_instance_id: InstanceId | None = None
    protocol_type: ClientText
    protocols: Annotated[FewOf[JoinProtocol], Field(min_length=1)]
    client_id: ClientText = ""
    client_host: ClientText = ""
    reason: ClientText | None = None


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
    member_id: MemberId
    assignment: Bytes


class SyncGroup(GroupRequest):
    generation_id: Int32
    member_id: MemberId
    group_instance_id: InstanceId | None = None
    protocol_type: ClientText | None = None
    protocol_name: ClientText | None = None
    assignments: ListOf[SyncAssignment] = Field(default_factory=list)


class SyncGroupResponse(Body):
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class Heartbeat(GroupRequest):
    generation_id: Int32
    member_id: MemberId
    group_instance_id: InstanceId | None = None


class MemberIdentity(Body):
    member_id: MemberId = ""
    group_instance_id: InstanceId | None = None
    reason: ClientText | None = None


class LeaveGroup(GroupRequest):
    members: Annotated[ListOf[MemberIdentity], Field(min_length=1)]


class MemberResult(Body):
    member_id: str
    group_instance_id: str | None = None
    error: ErrorCode = ErrorCode.NONE


class LeaveGroupResponse(Body):
    members: list[MemberResult]


class CommitPartition(Body):
    partition: PartitionId
    # Any int64, as Kafka's broker takes it (its clients refuse negative offsets).
    offset: Int64
    leader_epoch: Int32 = -1
    metadata: CommitMetadata | None = ""


class CommitTopic(Body):
    name: TopicText
    partitions: ListOf[CommitPartition]


class OffsetCommit(GroupRequest):
    # -1 and "" for a standalone (simple) consumer or an admin reset.
    generation_id: Int32 = -1
    member_id: MemberId = ""
    group_instance_id: InstanceId | None = None
    # Bounded so that commit time + retention (the expire timestamp) fits an int64.
    retention_time_ms: RetentionMs = -1
    topics: ListOf[CommitTopic]
    # kafkacoord's own, not Kafka's: set by its reset tools so the coordinator audits
    # the commit (a standalone consumer's member-less commit looks the same otherwise).
    # Sent only when set, so other commits still reach a daemon that predates it.
    reset: bool = Field(default=False, exclude_if=lambda set_: not set_)


class PartitionError(Body):
    partition: int
    error: ErrorCode = ErrorCode.NONE


class TopicErrors(Body):
    name: str
    partitions: list[PartitionError]


class OffsetCommitResponse(Body):
    topics: list[TopicErrors]


class FetchTopic(Body):
    name: TopicText
    partitions: ListOf[Int32]


class OffsetFetch(GroupRequest):
    # None fetches every committed offset of the group.
    topics: ListOf[FetchTopic] | None = None
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
    topics: ListOf[FetchTopic]


class OffsetDeleteResponse(Body):
    topics: list[TopicErrors]


class ListGroups(Body):
    """Sent to every shard; each answers for its own groups."""

    states_filter: FewOf[ClientText] = Field(default_factory=list)


class ListedGroup(Body):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # KIP-848's ListGroups v5: "classic" or "consumer"


class ListGroupsResponse(Body):
    groups: list[ListedGroup]


class DescribeGroups(Body):
    groups: Annotated[ListOf[GroupId], Field(min_length=1)]


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
    groups: Annotated[ListOf[GroupId], Field(min_length=1)]


class GroupResult(Body):
    group_id: str
    error: ErrorCode = ErrorCode.NONE


class DeleteGroupsResponse(Body):
    results: list[GroupResult]


# ---------------------------------------------------------------- KIP-848 consumer groups


class HeartbeatTopicPartitions(Body):
    topic: TopicText
    partitions: ListOf[Int32]


class ConsumerGroupHeartbeat(GroupRequest):
    """Kafka's ConsumerGroupHeartbeat (API 68). A field left ``None`` is unchanged since the
    member's last heartbeat; a full request (joining, or after an error) sets them all."""

    member_id: MemberId
    # 0 joins, -1 leaves, -2 is a static member leaving for a while.
    member_epoch: Int32
    instance_id: InstanceId | None = None
    rack_id: ClientText | None = None
    rebalance_timeout_ms: Int32 = -1
    subscribed_topic_names: ListOf[TopicText] | None = None
    subscribed_topic_regex: String | None = None
    server_assignor: ClientText | None = None
    topic_partitions: ListOf[HeartbeatTopicPartitions] | None = None
    client_id: ClientText = ""
    client_host: ClientText = ""


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

    group_ids: Annotated[ListOf[GroupId], Field(min_length=1)]


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


def named_groups(body: object) -> Sequence[str]:
    """The groups a group request names: each must belong to the shard it is sent to.
    ListGroups names none (every shard answers for its own)."""
    cls = type(body)  # exact types: pydantic's isinstance runs Python code
    if cls is DescribeGroups or cls is DeleteGroups:
        return cast(DescribeGroups, body).groups
    if cls is ConsumerGroupDescribe:
        return cast(ConsumerGroupDescribe, body).group_ids
    if cls is ListGroups:
        return ()
    return (cast(GroupRequest, body).group_id,)
