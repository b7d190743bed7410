"""Every API kafkacoord serves: its name, request body and response body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from . import controller_api as c
from . import group_api as g
from .base import Body, Empty
from .errors import ErrorCode, ProtocolError


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: its wire key (Kafka's own where Kafka has the API), name and bodies."""

    key: int
    name: str
    request: type[Body]
    response: type[Body]
    # Changes cluster state on an operator's behalf: with mutual TLS only
    # ``admin_principals`` may call it (Kafka's ALTER/CLUSTER_ACTION on the cluster).
    admin: bool = False
    max_version: int = 0


def _spec(key: int, request: type[Body], response: type[Body], *, admin: bool = False) -> ApiSpec:
    return ApiSpec(key, request.__name__, request, response, admin)


CONTROLLER_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(62, c.RegisterNode, c.RegisterNodeResponse),  # BrokerRegistration
        _spec(63, c.NodeHeartbeat, c.NodeHeartbeatResponse),  # BrokerHeartbeat
        _spec(7, c.ControlledShutdown, c.ControlledShutdownResponse, admin=True),
        _spec(64, c.FenceNode, Empty, admin=True),  # UnregisterBroker
        _spec(56, c.AlterPartition, c.PartitionStateBody),
        _spec(1000, c.ReplicaStatus, Empty),  # kafkacoord's own: a follower caught up
        _spec(19, c.CreateTopic, c.CreateTopicResponse, admin=True),  # CreateTopics
        _spec(20, c.DeleteTopic, Empty, admin=True),  # DeleteTopics
        _spec(37, c.CreatePartitions, c.CreatePartitionsResponse, admin=True),
        # IncrementalAlterConfigs, for topics.
        _spec(44, c.AlterTopicConfigs, c.AlterTopicConfigsResponse, admin=True),
        _spec(45, c.AlterReassignments, c.PartitionResults, admin=True),
        _spec(43, c.ElectLeaders, c.PartitionResults, admin=True),
        # kafkacoord's own: Cruise Control's rebalance and stop_proposal_execution.
        _spec(1001, c.StartRebalance, c.StartRebalanceResponse, admin=True),
        _spec(1002, c.StopRebalance, c.StopRebalanceResponse, admin=True),
    )
}

GROUP_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(11, g.JoinGroup, g.JoinGroupResponse),
        _spec(14, g.SyncGroup, g.SyncGroupResponse),
        _spec(12, g.Heartbeat, Empty),
        _spec(13, g.LeaveGroup, g.LeaveGroupResponse),
        _spec(8, g.OffsetCommit, g.OffsetCommitResponse),
        _spec(9, g.OffsetFetch, g.OffsetFetchResponse),
        _spec(47, g.OffsetDelete, g.OffsetDeleteResponse, admin=True),
        _spec(16, g.ListGroups, g.ListGroupsResponse),
        _spec(15, g.DescribeGroups, g.DescribeGroupsResponse),
        _spec(42, g.DeleteGroups, g.DeleteGroupsResponse, admin=True),
        _spec(68, g.ConsumerGroupHeartbeat, g.ConsumerGroupHeartbeatResponse),
        _spec(69, g.ConsumerGroupDescribe, g.ConsumerGroupDescribeResponse),
    )
}

ALL_APIS: Final[dict[str, ApiSpec]] = {**CONTROLLER_APIS, **GROUP_APIS}
APIS_BY_KEY: Final[dict[int, ApiSpec]] = {s.key: s for s in ALL_APIS.values()}


def encode_body(body: Body) -> bytes:
    return body.model_dump_json().encode()


def decode_request(spec: ApiSpec, data: bytes) -> Body:
    """Parse a request body; a malformed body is INVALID_REQUEST naming the bad fields."""
    try:
        return spec.request.model_validate_json(data)
    except ValidationError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_REQUEST, f"malformed {spec.name} body: {exc}"
        ) from exc


def decode_response(api: str, data: bytes) -> Body:
    return ALL_APIS[api].response.model_validate_json(data)
