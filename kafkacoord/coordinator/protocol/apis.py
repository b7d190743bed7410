"""Every API kafkacoord serves: its name, request body and response body."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from . import controller_api as c
from . import group_api as g
from .base import Body, Empty
from .errors import ErrorCode, ProtocolError
from .types import RefusedWith


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: its wire key (Kafka's own where Kafka has the API), name and bodies."""

    key: int
    name: str
    request: type[Body]
    response: type[Body]
    # Changes cluster state on an operator's behalf: with mutual TLS only
    # ``admin_principals`` may call it (Kafka's ALTER on the cluster, or on its topics
    # or groups), and others are refused with ``refused_with``.
    admin: bool = False
    max_version: int = 0
    # Sent by a node as itself, the node its body's ``node_id`` names (Kafka's
    # CLUSTER_ACTION): with mutual TLS only a principal node_principals maps to that
    # node may call it. An API both admin and node may be called by either.
    node: bool = False
    refused_with: ErrorCode = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _spec(
    key: int, request: type[Body], response: type[Body], *, admin: bool = False,
    node: bool = False, refused_with: ErrorCode = ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    max_version: int = 0,
) -> ApiSpec:  # fmt: skip
    return ApiSpec(key, request.__name__, request, response, admin, max_version, node=node,
                   refused_with=refused_with)  # fmt: skip


# Kafka's codes for an admin write refused on a topic or a group rather than the cluster.
_TOPIC: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_GROUP: Final = ErrorCode.GROUP_AUTHORIZATION_FAILED


CONTROLLER_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(62, c.RegisterNode, c.RegisterNodeResponse, node=True),  # BrokerRegistration
        _spec(63, c.NodeHeartbeat, c.NodeHeartbeatResponse, node=True),  # BrokerHeartbeat
        # A node's own, or an operator's on its behalf (kafkacoord shutdown-node).
        _spec(7, c.ControlledShutdown, c.ControlledShutdownResponse, admin=True, node=True),
        _spec(64, c.FenceNode, Empty, admin=True),  # UnregisterBroker
        _spec(56, c.AlterPartition, c.PartitionStateBody, node=True),
        # kafkacoord's own: a follower caught up.
        _spec(1000, c.ReplicaStatus, Empty, node=True),
        _spec(19, c.CreateTopic, c.CreateTopicResponse, admin=True, refused_with=_TOPIC),
        _spec(20, c.DeleteTopic, Empty, admin=True, refused_with=_TOPIC),  # DeleteTopics
        _spec(37, c.CreatePartitions, c.CreatePartitionsResponse, admin=True, refused_with=_TOPIC),
        # IncrementalAlterConfigs, for topics.
        _spec(
            44, c.AlterTopicConfigs, c.AlterTopicConfigsResponse, admin=True, refused_with=_TOPIC
        ),
        # DescribeConfigs, for topics: a read, so any client may call it.
        _spec(32, c.DescribeTopicConfigs, c.DescribeTopicConfigsResponse),
        _spec(45, c.AlterReassignments, c.PartitionResults, admin=True),
        _spec(43, c.ElectLeaders, c.PartitionResults, admin=True),
        # kafkacoord's own: Cruise Control's rebalance and stop_proposal_execution.
        _spec(1001, c.StartRebalance, c.StartRebalanceResponse, admin=True),
        _spec(1002, c.StopRebalance, c.StopRebalanceResponse, admin=True),
    )
}

# Heartbeat, OffsetCommit, OffsetFetch and ConsumerGroupHeartbeat: version 1 has binary
# bodies (.binary).
GROUP_APIS: Final[dict[str, ApiSpec]] = {
    s.name: s
    for s in (
        _spec(11, g.JoinGroup, g.JoinGroupResponse),
        _spec(14, g.SyncGroup, g.SyncGroupResponse),
        _spec(12, g.Heartbeat, Empty, max_version=1),
        _spec(13, g.LeaveGroup, g.LeaveGroupResponse),
        _spec(8, g.OffsetCommit, g.OffsetCommitResponse, max_version=1),
        _spec(9, g.OffsetFetch, g.OffsetFetchResponse, max_version=1),
        _spec(47, g.OffsetDelete, g.OffsetDeleteResponse, admin=True, refused_with=_GROUP),
        _spec(16, g.ListGroups, g.ListGroupsResponse),
        _spec(15, g.DescribeGroups, g.DescribeGroupsResponse),
        _spec(42, g.DeleteGroups, g.DeleteGroupsResponse, admin=True, refused_with=_GROUP),
        _spec(68, g.ConsumerGroupHeartbeat, g.ConsumerGroupHeartbeatResponse, max_version=1),
        _spec(69, g.ConsumerGroupDescribe, g.ConsumerGroupDescribeResponse),
    )
}

ALL_APIS: Final[dict[str, ApiSpec]] = {**CONTROLLER_APIS, **GROUP_APIS}
APIS_BY_KEY: Final[dict[int, ApiSpec]] = {s.key: s for s in ALL_APIS.values()}


def encode_body(body: Body) -> bytes:
    return body.model_dump_json().encode()


class RequestBodyError(ProtocolError):
    """A request body :func:`decode_request` refused.

    ``malformed``: it is not JSON, or not the API's shape (a field missing, unknown or
    of the wrong type), so nothing else on its connection can be trusted either: Kafka
    closes a connection on a request it cannot parse. Otherwise the body has the API's
    shape and only values beyond their bounds (:mod:`.types`): the request is refused
    and its connection serves on.
    """

    def __init__(self, code: ErrorCode, message: str, *, malformed: bool) -> None:
        super().__init__(code, message)
        self.malformed = malformed


# pydantic's errors for a value of the right type beyond its bound. Any other error
# (json_invalid, missing, extra_forbidden, string_type, ...) means a malformed body.
_BOUND_ERRORS: Final = frozenset(
    {
        "greater_than", "greater_than_equal", "less_than", "less_than_equal",
        "string_too_short", "string_too_long", "string_pattern_mismatch",
        "too_short", "too_long", "bytes_too_short", "bytes_too_long", "literal_error",
    }
)  # fmt: skip
_ERRORS_SHOWN: Final = 3
_INPUT_SHOWN: Final = 40  # characters of a bad value the message repeats
MESSAGE_MAX: Final = 1000


def decode_request(spec: ApiSpec, data: bytes) -> Body:
    """Parse a request body. A body that does not parse, or holds a value beyond its
    bound, raises :class:`RequestBodyError` naming the bad fields."""
    try:
        return spec.request.model_validate_json(data)
    except ValidationError as exc:
        raise _refusal(spec, exc) from exc


def _refusal(spec: ApiSpec, exc: ValidationError) -> RequestBodyError:
    errors = exc.errors(include_url=False, include_context=False)
    malformed = any(e["type"] not in _BOUND_ERRORS for e in errors)
    shown = "; ".join(_describe(e) for e in errors[:_ERRORS_SHOWN])
    if len(errors) > _ERRORS_SHOWN:
        shown += f"; and {len(errors) - _ERRORS_SHOWN} more"
    if malformed:
        message = f"malformed {spec.name} body: {shown}"
        return RequestBodyError(ErrorCode.INVALID_REQUEST, message[:MESSAGE_MAX], malformed=True)
    # Kafka's own code where the bound has one (an illegal topic name), if all agree.
    codes = {bound_code(spec.request, e["loc"]) for e in errors}
    code = codes.pop() if len(codes) == 1 else ErrorCode.INVALID_REQUEST
    message = f"{spec.name} {shown}"
    return RequestBodyError(code, message[:MESSAGE_MAX], malformed=False)


def _describe(error: ErrorDetails) -> str:
    # A map's keys are locations too: never repeat a long one whole.
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p[:_INPUT_SHOWN]}" for p in error["loc"])
    text = f"{path.lstrip('.')}: {error['msg']}" if path else error["msg"]
    if error["type"] == "json_invalid":
        return text  # its input is the whole body
    return f"{text} (got {_shown(error['input'])})"


def _shown(value: object) -> str:
    """A bad value as a message may repeat it: never more than a few dozen characters."""
    if isinstance(value, str | bytes):
        if len(value) <= _INPUT_SHOWN:
            return repr(value)
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[: _INPUT_SHOWN // 2]!r}... ({len(value)} {unit})"
    if isinstance(value, list | dict):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= _INPUT_SHOWN else f"{text[:_INPUT_SHOWN]}..."


def bound_code(model: type[BaseModel], loc: tuple[int | str, ...]) -> ErrorCode:
    """The code a value beyond its bound at ``loc`` (pydantic's error location) is refused
    with: the field's :class:`RefusedWith`, else INVALID_REQUEST. Runs on errors only."""
    tp: Any = model
    meta: list[Any] = []
    parts = list(loc)
    while True:
        tp, meta = _unwrapped(tp, meta)
        if not parts:
            break
        part = parts.pop(0)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(str(part))
            if field is None:
                return ErrorCode.INVALID_REQUEST
            tp, meta = field.annotation, list(field.metadata)
        elif get_origin(tp) is list:
            tp, meta = get_args(tp)[0], []
        elif get_origin(tp) is dict:
            key, value = get_args(tp)
            is_key = bool(parts) and parts[0] == "[key]"
            if is_key:
                parts.pop(0)
            tp, meta = (key if is_key else value), []
        else:
            return ErrorCode.INVALID_REQUEST
    return next((m.code for m in meta if isinstance(m, RefusedWith)), ErrorCode.INVALID_REQUEST)


def _unwrapped(tp: Any, meta: list[Any]) -> tuple[Any, list[Any]]:
    """``tp`` without Annotated (its metadata joins ``meta``) and without ``| None``."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp, *extra = get_args(tp)
            meta = [*meta, *extra]
        elif origin is Union or origin is types.UnionType:
            options = [a for a in get_args(tp) if a is not type(None)]
            if len(options) != 1:
                return tp, meta
            tp = options[0]
        else:
            return tp, meta


def decode_response(api: str, data: bytes) -> Body:
    return ALL_APIS[api].response.model_validate_json(data)
