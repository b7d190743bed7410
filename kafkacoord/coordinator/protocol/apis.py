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
    name: str
    request: type[Body]
    response: type[Body]


def _spec(request: type[Body], response: type[Body]) -> ApiSpec:
    return ApiSpec(request.__name__, request, response)


CONTROLLER_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(c.RegisterNode, c.RegisterNodeResponse),
        _spec(c.NodeHeartbeat, c.NodeHeartbeatResponse),
        _spec(c.ControlledShutdown, c.ControlledShutdownResponse),
        _spec(c.FenceNode, Empty),
        _spec(c.AlterPartition, c.PartitionStateBody),
        _spec(c.ReplicaStatus, Empty),
        _spec(c.CreateTopic, c.CreateTopicResponse),
        _spec(c.DeleteTopic, Empty),
        _spec(c.CreatePartitions, c.CreatePartitionsResponse),
        _spec(c.AlterReassignments, c.PartitionResults),
        _spec(c.ElectLeaders, c.PartitionResults),
    )
}

GROUP_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(g.JoinGroup, g.JoinGroupResponse),
        _spec(g.SyncGroup, g.SyncGroupResponse),
        _spec(g.Heartbeat, Empty),
        _spec(g.LeaveGroup, g.LeaveGroupResponse),
        _spec(g.OffsetCommit, g.OffsetCommitResponse),
        _spec(g.OffsetFetch, g.OffsetFetchResponse),
        _spec(g.OffsetDelete, g.OffsetDeleteResponse),
        _spec(g.ListGroups, g.ListGroupsResponse),
        _spec(g.DescribeGroups, g.DescribeGroupsResponse),
        _spec(g.DeleteGroups, g.DeleteGroupsResponse),
    )
}

ALL_APIS: Final[dict[str, ApiSpec]] = {**CONTROLLER_APIS, **GROUP_APIS}


def encode_body(body: Body) -> bytes:
    return body.model_dump_json().encode()


def decode_request(apis: dict[str, ApiSpec], api: str, data: bytes) -> Body:
    """Parse a request body; an unknown API or a malformed body is INVALID_REQUEST."""
    spec = apis.get(api)
    if spec is None:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"unknown api {api!r}")
    try:
        return spec.request.model_validate_json(data)
    except ValidationError as exc:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"malformed {api} body: {exc}") from exc


def decode_response(api: str, data: bytes) -> Body:
    return ALL_APIS[api].response.model_validate_json(data)
