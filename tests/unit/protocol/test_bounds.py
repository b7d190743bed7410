"""Request bodies are bounded at the edge: every field, by the type it ends up in.

The walk below fails on any request field (nested models, list items, map keys and
values included) whose type has no bound, so a new field cannot forget one. The rest
holds the bounds to what they guard: Kafka's wire types, the Avro types of the records
the values become, and the answers a value beyond its bound gets.
"""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kafkacoord.codecs import schemas
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode, RequestBodyError, decode_request
from kafkacoord.coordinator.protocol import controller_api as c
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.apis import MESSAGE_MAX, bound_code
from kafkacoord.coordinator.protocol.types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_PARTITIONS_PER_BATCH,
    RETENTION_MS_MAX,
    TIMESTAMP_MS_MAX,
)

AVRO_RANGES = {"int": (INT32_MIN, INT32_MAX), "long": (INT64_MIN, INT64_MAX)}


# -- the walk ---------------------------------------------------------------------------------


def _constraints(extra: Any) -> list[Any]:
    # Field(...) inside Annotated arrives as a FieldInfo holding its constraints.
    return list(extra.metadata) if isinstance(extra, FieldInfo) else [extra]


def _unbounded(tp: Any, meta: list[Any], where: str, seen: set[type]) -> Iterator[str]:
    """Where ``tp`` (with the constraints ``meta`` so far) or anything inside it lacks a
    bound."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp, *extras = get_args(tp)
            meta = [*meta, *(m for e in extras for m in _constraints(e))]
        elif origin is Union or origin is types.UnionType:
            options = [a for a in get_args(tp) if a is not type(None)]
            if len(options) != 1:
                yield f"{where}: a union of {options} (bound each in a model of its own)"
                return
            tp = options[0]
        else:
            break
    kinds = {type(m) for m in meta}
    has_max = at.MaxLen in kinds
    origin = get_origin(tp)
    if tp is bool or origin is Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return
    if tp is int:
        if not kinds & {at.Ge, at.Gt} or not kinds & {at.Le, at.Lt}:
            yield f"{where}: int without both a lower and an upper bound"
    elif tp is str or tp is bytes:
        if not has_max:
            yield f"{where}: {tp.__name__} without max_length"
    elif origin is list:
        if not has_max:
            yield f"{where}: list without max_length"
        yield from _unbounded(get_args(tp)[0], [], f"{where}[]", seen)
    elif origin is dict:
        if not has_max:
            yield f"{where}: dict without max_length"
        key, value = get_args(tp)
        yield from _unbounded(key, [], f"{where}{{key}}", seen)
        yield from _unbounded(value, [], f"{where}{{value}}", seen)
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        yield from _model_unbounded(tp, seen)
    else:
        yield f"{where}: {tp!r} is not a type this walk knows how to bound"


def _model_unbounded(model: type[BaseModel], seen: set[type]) -> Iterator[str]:
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        where = f"{model.__name__}.{name}"
        yield from _unbounded(field.annotation, list(field.metadata), where, seen)


def _request_models() -> list[type[BaseModel]]:
    return sorted({spec.request for spec in ALL_APIS.values()}, key=lambda m: m.__name__)


def test_every_request_field_is_bounded() -> None:
    seen: set[type] = set()
    problems = [p for model in _request_models() for p in _model_unbounded(model, seen)]
    assert not problems, "request fields without a bound:\n" + "\n".join(problems)
    # The walk did reach nested models.
    assert {g.CommitPartition, g.JoinProtocol, c.RebalanceMoveBody} <= seen


def test_the_walk_finds_an_unbounded_field() -> None:
    class Inner(BaseModel):
        ok: Annotated[int, at.Ge(0), at.Le(1)]
        loose: list[str]

    class Outer(BaseModel):
        n: int
        inner: Inner | None
        names: dict[str, int]

    problems = list(_model_unbounded(Outer, set()))
    assert problems == [
        "Outer.n: int without both a lower and an upper bound",
        "Inner.loose: list without max_length",
        "Inner.loose[]: str without max_length",
        "Outer.names: dict without max_length",
        "Outer.names{key}: str without max_length",
        "Outer.names{value}: int without both a lower and an upper bound",
    ]


# -- bounds against the records the values become -----------------------------------------


def _avro_fields(schema: str) -> dict[str, Any]:
    """Every field of a record schema (and of records nested in it), by dotted name."""
    found: dict[str, Any] = {}

    def walk(record: dict[str, Any], prefix: str) -> None:
        for f in record["fields"]:
            found[prefix + f["name"]] = f["type"]
            for t in f["type"] if isinstance(f["type"], list) else [f["type"]]:
                if isinstance(t, dict) and t.get("type") == "record":
                    walk(t, prefix + f["name"] + ".")
                if isinstance(t, dict) and t.get("type") == "array":
                    items = t["items"]
                    if isinstance(items, dict) and items.get("type") == "record":
                        walk(items, prefix + f["name"] + "[].")

    name = schema
    walk(schemas.raw(name, schemas.versions(name)[-1]), "")
    return found


def _int_bounds(model: type[BaseModel], field: str) -> tuple[int, int]:
    meta = model.model_fields[field].metadata
    lows = [m.ge for m in meta if isinstance(m, at.Ge)]
    highs = [m.le for m in meta if isinstance(m, at.Le)]
    assert len(lows) == 1 and len(highs) == 1, (model.__name__, field, meta)
    low, high = lows[0], highs[0]
    assert isinstance(low, int) and isinstance(high, int)
    return low, high


# (request model, field) -> (schema, field) of the record the value is written into.
BECOMES = [
    (g.CommitPartition, "offset", "offset_commit_value", "offset"),
    (g.CommitPartition, "leader_epoch", "offset_commit_value", "leader_epoch"),
    (g.CommitPartition, "partition", "offset_commit_key", "partition"),
    (g.JoinGroup, "session_timeout_ms", "group_metadata_value", "members[].session_timeout_ms"),
    (g.JoinGroup, "rebalance_timeout_ms", "group_metadata_value",
     "members[].rebalance_timeout_ms"),
    (g.SyncGroup, "generation_id", "group_metadata_value", "generation"),
    (g.ConsumerGroupHeartbeat, "rebalance_timeout_ms", "consumer_group_member_metadata_value",
     "rebalance_timeout_ms"),
    (g.ConsumerGroupHeartbeat, "member_epoch", "consumer_group_current_member_assignment_value",
     "member_epoch"),
    (c.RegisterNode, "node_id", "node_value", "node_id"),
    (c.NodeHeartbeat, "node_epoch", "node_value", "node_epoch"),
    (c.CreateTopic, "num_partitions", "topic_value", "num_partitions"),
    (c.CreateTopic, "replication_factor", "topic_value", "replication_factor"),
    (c.CreatePartitions, "count", "topic_value", "num_partitions"),
    (c.AlterPartition, "partition", "partition_value", "partition"),
    (c.AlterPartition, "leader_epoch", "partition_value", "leader_epoch"),
    (c.AlterPartition, "partition_epoch", "partition_value", "partition_epoch"),
    (c.RebalanceMoveBody, "partition", "rebalance_value", "moves[].partition"),
    (c.StartRebalance, "max_concurrent_moves_per_node", "rebalance_value",
     "max_concurrent_moves_per_node"),
    (c.StartRebalance, "max_concurrent_moves", "rebalance_value", "max_concurrent_moves"),
    (c.StartRebalance, "max_concurrent_leader_moves", "rebalance_value",
     "max_concurrent_leader_moves"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "field", "schema", "avro_field"), BECOMES)
def test_an_int_fits_the_avro_type_it_becomes(
    model: type[BaseModel], field: str, schema: str, avro_field: str
) -> None:
    low, high = _int_bounds(model, field)
    avro_low, avro_high = AVRO_RANGES[_avro_fields(schema)[avro_field]]
    assert avro_low <= low <= high <= avro_high


def test_commit_time_plus_retention_fits_the_expire_timestamp() -> None:
    assert _avro_fields("offset_commit_value")["expire_timestamp_ms"] == ["null", "long"]
    low, high = _int_bounds(g.OffsetCommit, "retention_time_ms")
    assert high == RETENTION_MS_MAX
    assert TIMESTAMP_MS_MAX + high == INT64_MAX
    assert low == INT64_MIN  # negative: no expire timestamp is written


# -- what a body beyond its bounds gets ----------------------------------------------------


def _commit(partition: dict[str, Any] | None = None, **fields: Any) -> bytes:
    part = {"partition": 0, "offset": 5, **(partition or {})}
    body = {"group_id": "g", "topics": [{"name": "orders", "partitions": [part]}], **fields}
    return json.dumps(body).encode()


def _refused(api: str, body: bytes) -> RequestBodyError:
    with pytest.raises(RequestBodyError) as caught:
        decode_request(ALL_APIS[api], body)
    return caught.value


# The malformed commits that took a shard offline: each is refused at the edge.
OUT_OF_RANGE_COMMITS = {
    "leader_epoch 2**31": (_commit({"leader_epoch": 2**31}),
                           "topics[0].partitions[0].leader_epoch"),
    "leader_epoch -2**40": (_commit({"leader_epoch": -(2**40)}),
                            "topics[0].partitions[0].leader_epoch"),
    "offset 2**63": (_commit({"offset": 2**63}), "topics[0].partitions[0].offset"),
    "retention_time_ms 2**63": (_commit(retention_time_ms=2**63), "retention_time_ms"),
    "retention_time_ms 2**63-1": (_commit(retention_time_ms=2**63 - 1), "retention_time_ms"),
}  # fmt: skip


@pytest.mark.parametrize("case", OUT_OF_RANGE_COMMITS)
def test_an_out_of_range_commit_is_refused_naming_its_field(case: str) -> None:
    body, field = OUT_OF_RANGE_COMMITS[case]
    exc = _refused("OffsetCommit", body)
    assert exc.code is ErrorCode.INVALID_REQUEST
    assert not exc.malformed
    assert exc.message is not None and exc.message.startswith(f"OffsetCommit {field}: ")


def test_the_extremes_of_each_type_are_accepted() -> None:
    body = decode_request(
        ALL_APIS["OffsetCommit"],
        _commit({"leader_epoch": INT32_MAX, "offset": INT64_MAX, "partition": INT32_MAX},
                generation_id=INT32_MIN, retention_time_ms=RETENTION_MS_MAX),
    )  # fmt: skip
    assert isinstance(body, g.OffsetCommit)
    [p] = body.topics[0].partitions
    assert (p.leader_epoch, p.offset, p.partition) == (INT32_MAX, INT64_MAX, INT32_MAX)
    # Kafka's broker takes any int64 offset (only its clients refuse negative ones).
    assert decode_request(ALL_APIS["OffsetCommit"], _commit({"offset": INT64_MIN}))


@pytest.mark.parametrize(
    ("api", "body", "words"),
    [
        ("OffsetCommit", b'{"group_id": "g"', "Invalid JSON"),
        ("OffsetCommit", b'{"group_id": 42, "topics": []}', "group_id: Input should be a valid"),
        ("OffsetCommit", b'{"topics": []}', "group_id: Field required"),
        ("OffsetCommit", b'{"group_id": "g", "topics": [], "extra": 1}', "extra: Extra inputs"),
        # Out of range and mistyped at once: the shape is wrong, so it is malformed.
        ("OffsetCommit", _commit({"leader_epoch": 2**31, "offset": "x"}), "offset"),
        ("Heartbeat", b"\xff\xfe", "Invalid JSON"),
    ],
)
def test_a_body_of_the_wrong_shape_is_malformed(api: str, body: bytes, words: str) -> None:
    exc = _refused(api, body)
    assert exc.code is ErrorCode.INVALID_REQUEST and exc.malformed
    assert exc.message is not None and exc.message.startswith(f"malformed {api} body: ")
    assert words in exc.message


def test_a_huge_input_is_not_echoed() -> None:
    group = "g" * 1_000_000
    exc = _refused("OffsetCommit", json.dumps({"group_id": group, "topics": []}).encode())
    assert exc.message is not None and len(exc.message) <= MESSAGE_MAX
    assert "group_id: String should have at most 32767 characters" in exc.message
    assert "(1000000 characters)" in exc.message
    # A map key is a location: a long bad one is cut short there too.
    configs = {"k" * 50_000: "v"}
    exc = _refused("CreateTopic", json.dumps({"name": "t", "configs": configs}).encode())
    assert exc.message is not None and len(exc.message) < 1000
    many = [{"partition": 0, "offset": 2**63}] * 5000
    body = json.dumps({"group_id": "g", "topics": [{"name": "t", "partitions": many}]})
    exc = _refused("OffsetCommit", body.encode())
    assert exc.message is not None and exc.message.endswith("; and 4997 more")


@pytest.mark.parametrize(
    ("api", "body", "code"),
    [
        ("CreateTopic", json.dumps({"name": "x" * 250}).encode(),
         ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("CreateTopic", b'{"name": ""}', ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("DeleteTopic", b'{"name": "orders/eu"}', ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("AlterTopicConfigs", b'{"topic": "a b"}', ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("CreateTopic", b'{"name": "wide", "num_partitions": 10001}', ErrorCode.POLICY_VIOLATION),
        ("CreateTopic",
         json.dumps({"name": "wide", "replica_assignment": {str(p): [1] for p in range(10001)}})
         .encode(), ErrorCode.POLICY_VIOLATION),
        # Two bounds with codes of their own: neither is the answer.
        ("CreateTopic", b'{"name": "a b", "num_partitions": 10001}', ErrorCode.INVALID_REQUEST),
        # A replica inside an assignment: only the count of new partitions has a code.
        ("CreateTopic", b'{"name": "t", "replica_assignment": {"0": [2147483648]}}',
         ErrorCode.INVALID_REQUEST),
        ("ElectLeaders", b'{"election_type": "sometimes"}', ErrorCode.INVALID_REQUEST),
        ("NodeHeartbeat", b'{"node_id": -1, "node_epoch": 0}', ErrorCode.INVALID_REQUEST),
    ],
)  # fmt: skip
def test_kafkas_own_code_where_it_has_one(api: str, body: bytes, code: ErrorCode) -> None:
    exc = _refused(api, body)
    assert not exc.malformed
    assert exc.code is code, exc.message


def test_a_broker_topic_is_bounded_by_length_only() -> None:
    # Group APIs name topics of the broker, which may hold names Kafka refuses.
    body = _commit().replace(b'"orders"', b'"orders and more"')
    ok = decode_request(ALL_APIS["OffsetCommit"], body)
    assert isinstance(ok, g.OffsetCommit) and ok.topics[0].name == "orders and more"
    exc = _refused("OffsetFetch", json.dumps({"group_id": "g", "topics": [
        {"name": "t" * 40_000, "partitions": [0]}]}).encode())  # fmt: skip
    assert exc.code is ErrorCode.INVALID_REQUEST and "topics[0].name" in (exc.message or "")


def test_the_partition_limit_of_one_create_is_kafkas() -> None:
    ok = decode_request(ALL_APIS["CreateTopic"], b'{"name": "t", "num_partitions": 10000}')
    assert isinstance(ok, c.CreateTopic) and ok.num_partitions == MAX_PARTITIONS_PER_BATCH


def test_bound_code_follows_nested_locations() -> None:
    assert bound_code(c.AlterReassignments, ("reassignments", 3, "topic")) is (
        ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    assert bound_code(g.OffsetCommit, ("topics", 3, "partitions", 0, "offset")) is (
        ErrorCode.INVALID_REQUEST
    )
    assert bound_code(c.CreateTopic, ("replica_assignment",)) is ErrorCode.POLICY_VIOLATION
    assert bound_code(c.CreateTopic, ("replica_assignment", "7", "[key]")) is (
        ErrorCode.INVALID_REQUEST
    )
    assert bound_code(c.CreatePartitions, ("assignment",)) is ErrorCode.POLICY_VIOLATION
    assert bound_code(c.CreatePartitions, ("assignment", 0, 1)) is ErrorCode.INVALID_REQUEST
    assert bound_code(g.OffsetCommit, ("no_such_field",)) is ErrorCode.INVALID_REQUEST


def test_named_groups() -> None:
    assert g.named_groups(g.Heartbeat(group_id="a", generation_id=1, member_id="m")) == ("a",)
    assert g.named_groups(g.DescribeGroups(groups=["a", "b"])) == ["a", "b"]
    assert g.named_groups(g.DeleteGroups(groups=["c"])) == ["c"]
    assert g.named_groups(g.ConsumerGroupDescribe(group_ids=["d"])) == ["d"]
    assert g.named_groups(g.ListGroups()) == ()


def test_replies_are_not_held_to_request_bounds() -> None:
    # A topic the broker holds under a name Kafka would refuse still travels in a reply.
    g.HeartbeatTopicPartitions(topic="a topic with spaces", partitions=[0])
    g.ConsumerGroupHeartbeatResponse(member_id="m" * 40_000, member_epoch=2**40)
