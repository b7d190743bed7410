"""What the dispatcher refuses before any shard sees a request, and what it counts.

A body that does not parse closes its connection (as Kafka closes on a request it
cannot read); a body of the right shape with a value beyond its bound, or a group
request sent to a shard that does not own its group, is answered alone and the
connection serves on. Each refusal is counted by api and reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode, encode_body
from kafkacoord.coordinator.protocol import controller_api as c
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.server.ops.collectors import StatusCollector
from kafkacoord.server.ops.status import StatusSource
from kafkacoord.server.services.dispatch import RequestDispatcher
from kafkacoord.wire import RequestHeader
from kafkacoord.wire.limits import ListenerStats

PARTITIONS = 7


@dataclass
class FakeConnection:
    """The parts of a ServerConnection the dispatcher uses."""

    principal: str | None = None
    peer: str = "127.0.0.1:5555"
    attachment: Any = None
    closed: bool = False
    answers: list[tuple[int, ErrorCode, str]] = field(default_factory=list)

    def reject(self, header: RequestHeader, code: int, message: str, *, close: bool) -> None:
        self.answers.append((header.correlation_id, ErrorCode(code), message))
        self.closed = self.closed or close


class Routed:
    def __init__(self) -> None:
        self.controller: list[Request] = []
        self.groups: list[tuple[int, Request]] = []

    def dispatcher(self, partitions: int | None = PARTITIONS) -> RequestDispatcher:
        return RequestDispatcher(
            self.controller.append, self.groups.extend, offsets_partitions=partitions
        )


def frame(api: str, body: bytes | Any, *, shard: int = -1, cid: int = 1) -> tuple[Any, bytes]:
    data = body if isinstance(body, bytes) else encode_body(body)
    return RequestHeader(ALL_APIS[api].key, 0, cid, shard, "test"), data


def shard_of(group: str) -> int:
    return partition_for(group, PARTITIONS)


def commit(group: str = "orders-app") -> g.OffsetCommit:
    part = g.CommitPartition(partition=0, offset=5)
    return g.OffsetCommit(group_id=group, topics=[g.CommitTopic(name="orders", partitions=[part])])


def raw_commit(group: str = "orders-app", **partition: Any) -> bytes:
    """A commit whose partition has ``partition``'s values, which a client could not build."""
    raw = json.loads(encode_body(commit(group)))
    raw["topics"][0]["partitions"][0].update(partition)
    return json.dumps(raw).encode()


def test_an_out_of_range_value_is_refused_and_the_connection_serves_on() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    shard = shard_of("orders-app")
    dispatch(
        [
            frame("OffsetCommit", raw_commit(leader_epoch=2**31), shard=shard, cid=1),
            frame("OffsetCommit", commit(), shard=shard, cid=2),
        ],
        conn,  # type: ignore[arg-type]
    )
    [(cid, code, message)] = conn.answers
    assert (cid, code) == (1, ErrorCode.INVALID_REQUEST)
    assert message.startswith("OffsetCommit topics[0].partitions[0].leader_epoch: ")
    assert not conn.closed
    # The next request of the same read reached its shard.
    assert [(s, r.ref.correlation_id) for s, r in routed.groups] == [(shard, 2)]
    assert dispatch.stats.refused == {("OffsetCommit", "out_of_range"): 1}
    assert dispatch.stats.rejected == {"INVALID_REQUEST": 1}


def test_a_malformed_body_closes_the_connection() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    shard = shard_of("orders-app")
    dispatch(
        [
            frame("OffsetCommit", b'{"group_id": 42, "topics": {}}', shard=shard, cid=1),
            frame("OffsetCommit", commit(), shard=shard, cid=2),
        ],
        conn,  # type: ignore[arg-type]
    )
    [(cid, code, message)] = conn.answers
    assert (cid, code) == (1, ErrorCode.INVALID_REQUEST)
    assert message.startswith("malformed OffsetCommit body: ")
    assert conn.closed and routed.groups == []  # what followed it was not served
    assert dispatch.stats.refused == {("OffsetCommit", "malformed"): 1}


def test_unknown_apis_and_versions_close_the_connection() -> None:
    dispatch = Routed().dispatcher()
    heartbeat = ALL_APIS["Heartbeat"].key
    for header, reason in (
        (RequestHeader(999, 0, 1, 0, "t"), ("unknown", "unknown_api")),
        (RequestHeader(heartbeat, 3, 1, 0, "t"), ("Heartbeat", "unsupported_version")),
    ):
        conn = FakeConnection()
        dispatch([(header, b"{}")], conn)  # type: ignore[arg-type]
        assert conn.closed
        assert dispatch.stats.refused[reason] == 1


def test_a_topic_name_kafka_refuses() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    # The controller owns its topics: Kafka's rule and Kafka's code.
    dispatch([frame("DeleteTopic", b'{"name": "orders/eu"}', cid=1)], conn)  # type: ignore[arg-type]
    [(_, code, message)] = conn.answers
    assert code is ErrorCode.INVALID_TOPIC_EXCEPTION and message.startswith("DeleteTopic name: ")
    assert not conn.closed and routed.controller == []
    # A group's topic is the broker's, whose rule may be looser (tansu's is).
    body = encode_body(commit()).replace(b'"orders"', b'"orders eu"')
    dispatch([frame("OffsetCommit", body, shard=shard_of("orders-app"), cid=2)], conn)  # type: ignore[arg-type]
    assert len(conn.answers) == 1 and len(routed.groups) == 1


def test_a_group_sent_to_another_shard_is_not_coordinator_there() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    owner = shard_of("orders-app")
    other = (owner + 1) % PARTITIONS
    dispatch(
        [
            frame("OffsetCommit", commit(), shard=other, cid=1),
            frame("OffsetFetch", g.OffsetFetch(group_id="orders-app"), shard=PARTITIONS, cid=2),
            frame("OffsetFetch", g.OffsetFetch(group_id="orders-app"), shard=-1, cid=3),
            frame("OffsetFetch", g.OffsetFetch(group_id="orders-app"), shard=owner, cid=4),
        ],
        conn,  # type: ignore[arg-type]
    )
    codes = {cid: (code, message) for cid, code, message in conn.answers}
    assert codes[1] == (
        ErrorCode.NOT_COORDINATOR, f"group 'orders-app' belongs to shard {owner}, not {other}"
    )  # fmt: skip
    assert codes[2][0] is ErrorCode.NOT_COORDINATOR and "not a partition" in codes[2][1]
    assert codes[3][0] is ErrorCode.NOT_COORDINATOR
    assert not conn.closed
    assert [(s, r.ref.correlation_id) for s, r in routed.groups] == [(owner, 4)]
    assert dispatch.stats.refused == {
        ("OffsetCommit", "wrong_shard"): 1, ("OffsetFetch", "wrong_shard"): 2,
    }  # fmt: skip


def groups_on(shard: int, count: int) -> list[str]:
    found = [f"grp-{i}" for i in range(1000) if shard_of(f"grp-{i}") == shard]
    return found[:count]


def test_multi_group_requests_must_all_belong_to_their_shard() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    here = groups_on(2, 3)
    stranger = groups_on(5, 1)[0]
    dispatch(
        [
            frame("DescribeGroups", g.DescribeGroups(groups=here), shard=2, cid=1),
            frame("DescribeGroups", g.DescribeGroups(groups=[*here, stranger]), shard=2, cid=2),
            frame("DeleteGroups", g.DeleteGroups(groups=[stranger]), shard=2, cid=3),
            frame("ConsumerGroupDescribe", g.ConsumerGroupDescribe(group_ids=here), shard=2,
                  cid=4),
            frame("ConsumerGroupDescribe", g.ConsumerGroupDescribe(group_ids=[stranger]),
                  shard=2, cid=5),
            # ListGroups goes to every shard and names no group.
            frame("ListGroups", g.ListGroups(), shard=0, cid=6),
            frame("ListGroups", g.ListGroups(), shard=6, cid=7),
        ],
        conn,  # type: ignore[arg-type]
    )  # fmt: skip
    assert sorted(cid for cid, _, _ in conn.answers) == [2, 3, 5]
    assert all(code is ErrorCode.NOT_COORDINATOR for _, code, _ in conn.answers)
    messages = {cid: message for cid, _, message in conn.answers}
    assert messages[2] == f"group '{stranger}' belongs to shard 5, not 2"
    assert sorted(r.ref.correlation_id for _, r in routed.groups) == [1, 4, 6, 7]


def test_controller_requests_and_an_unconfigured_dispatcher_are_not_checked() -> None:
    routed, conn = Routed(), FakeConnection()
    unchecked = routed.dispatcher(partitions=None)
    unchecked([frame("OffsetCommit", commit(), shard=99)], conn)  # type: ignore[arg-type]
    assert [s for s, _ in routed.groups] == [99]
    checked = routed.dispatcher()
    body = c.NodeHeartbeat(node_id=1, node_epoch=2**40)
    checked([frame("NodeHeartbeat", body, shard=12345)], conn)  # type: ignore[arg-type]
    assert len(routed.controller) == 1 and conn.answers == []


def test_a_long_group_id_is_cut_short_in_the_answer() -> None:
    routed, conn = Routed(), FakeConnection()
    group = "g" * 30_000
    wrong = (shard_of(group) + 1) % PARTITIONS
    routed.dispatcher()([frame("OffsetFetch", g.OffsetFetch(group_id=group), shard=wrong)],
                        conn)  # type: ignore[arg-type]  # fmt: skip
    [(_, code, message)] = conn.answers
    assert code is ErrorCode.NOT_COORDINATOR and "(30000 characters)" in message
    assert len(message) < 200


@dataclass
class _Listener:
    stats: ListenerStats = field(
        default_factory=lambda: ListenerStats(connections=1, accepted=1, requests=3)
    )


def test_refusals_are_exported_by_api_and_reason() -> None:
    routed, conn = Routed(), FakeConnection()
    dispatch = routed.dispatcher()
    shard = shard_of("orders-app")
    dispatch(
        [
            frame("OffsetCommit", raw_commit(offset=2**63), shard=shard, cid=1),
            frame("OffsetCommit", raw_commit(leader_epoch=-(2**40)), shard=shard, cid=2),
            frame("OffsetCommit", commit(), shard=(shard + 1) % PARTITIONS, cid=3),
        ],
        conn,  # type: ignore[arg-type]
    )
    source = StatusSource(0, started=lambda: True, controller=lambda: None, groups=lambda: None,
                          listener=_Listener,  # type: ignore[arg-type]
                          dispatcher=dispatch)  # fmt: skip
    registry = CollectorRegistry()
    registry.register(StatusCollector(source.read))
    value = registry.get_sample_value
    refused = "kafkacoord_requests_refused_total"
    assert value(refused, {"api": "OffsetCommit", "reason": "out_of_range"}) == 2
    assert value(refused, {"api": "OffsetCommit", "reason": "wrong_shard"}) == 1
    # The older metric, by error code, still counts the same refusals.
    assert value("kafkacoord_request_rejects_total", {"error": "INVALID_REQUEST"}) == 2
    assert value("kafkacoord_request_rejects_total", {"error": "NOT_COORDINATOR"}) == 1


def test_a_controller_request_carries_its_connection_s_principal() -> None:
    # The controller records it in the cause of what an admin request decides.
    routed, conn = Routed(), FakeConnection(principal="CN=alice,O=ops")
    routed.dispatcher()([frame("FenceNode", c.FenceNode(node_id=3), cid=9)], conn)  # type: ignore[arg-type]
    [request] = routed.controller
    assert (request.ref.principal, request.ref.client_id, request.ref.correlation_id) == (
        "CN=alice,O=ops", "test", 9)  # fmt: skip
