"""The steady group APIs' two encodings over real sockets: the client's binary
body (version 1), an older client's JSON (version 0), and a client meeting a daemon that
predates version 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from kafkacoord.client.connector import CoordinatorClient, error_of
from kafkacoord.client.routes import StaticRoutes
from kafkacoord.coordinator.groups.commit_replies import CommitReplies
from kafkacoord.coordinator.protocol import (
    ALL_APIS,
    APIS_BY_KEY,
    Body,
    Empty,
    ErrorCode,
    encode_body,
)
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.binary_commit import BinaryHeartbeat, BinaryOffsetCommit
from kafkacoord.coordinator.protocol.binary_consumer import BinaryConsumerHeartbeat
from kafkacoord.coordinator.protocol.binary_fetch import BinaryOffsetFetch
from kafkacoord.coordinator.runtime.shard import Reply, Request
from kafkacoord.server.services.dispatch import RequestDispatcher
from kafkacoord.wire import Listener
from tests.rawwire import raw_call

pytestmark = pytest.mark.integration

SPEC = ALL_APIS["OffsetCommit"]
COMMIT = g.OffsetCommit(
    group_id="g",
    member_id="",
    topics=[g.CommitTopic(name="t", partitions=[g.CommitPartition(partition=3, offset=41)])],
)

FETCHED = g.OffsetFetchResponse(
    topics=[
        g.FetchedTopic(
            name="t",
            partitions=[
                g.FetchedPartition(partition=3, offset=41, metadata=None, commit_timestamp_ms=7),
                g.FetchedPartition(partition=4, offset=-1, error=ErrorCode.UNSTABLE_OFFSET_COMMIT),
            ],
        )
    ]
)
ASSIGNED = g.ConsumerGroupHeartbeatResponse(
    member_id="m",
    member_epoch=5,
    heartbeat_interval_ms=3000,
    assignment=[g.HeartbeatTopicPartitions(topic="t", partitions=[0, 2])],
)
ANSWERS: dict[str, Body] = {
    "Heartbeat": Empty(),
    "OffsetFetch": FETCHED,
    "ConsumerGroupHeartbeat": ASSIGNED,
}


class Offsets:
    """A group target answering each commit as a shard does (CommitReplies)."""

    def __init__(self) -> None:
        self.seen: list[Request] = []
        self._replies = CommitReplies()

    def __call__(self, requests: list[tuple[int, Request]]) -> None:
        for _, request in requests:
            self.seen.append(request)
            assert request.ref.channel is not None
            if request.api in ANSWERS:
                reply = Reply(request.ref, request.api, body=ANSWERS[request.api])
                request.ref.channel.deliver([reply])
                continue
            body = request.body
            assert isinstance(body, g.OffsetCommit | BinaryOffsetCommit)
            outcomes = [(t.name, [(p.partition, ErrorCode.NONE) for p in t.partitions])
                        for t in body.topics]  # fmt: skip
            request.ref.channel.deliver([self._replies.reply(request.ref, outcomes)])


@pytest.fixture
def served() -> Iterator[tuple[str, Offsets]]:
    offsets = Offsets()
    listener = Listener("127.0.0.1", 0, RequestDispatcher(lambda r: None, offsets)).start()
    try:
        yield listener.endpoint, offsets
    finally:
        listener.close()


def _client(endpoint: str) -> CoordinatorClient:
    return CoordinatorClient("unused:9092", routes=StaticRoutes({0: endpoint}))


def _committed(request: Request) -> list[tuple[str, int, int]]:
    body = request.body
    assert isinstance(body, g.OffsetCommit | BinaryOffsetCommit)
    return [(t.name, p.partition, p.offset) for t in body.topics for p in t.partitions]


def test_a_client_commits_with_a_binary_body(served: tuple[str, Offsets]) -> None:
    endpoint, offsets = served
    with _client(endpoint) as client:
        reply = client.call(0, COMMIT, g.OffsetCommitResponse)
    assert reply == g.OffsetCommitResponse(
        topics=[g.TopicErrors(name="t", partitions=[g.PartitionError(partition=3)])]
    )
    [request] = offsets.seen
    assert type(request.body) is BinaryOffsetCommit and request.ref.api_version == 1
    assert _committed(request) == [("t", 3, 41)]


def test_an_older_clients_json_commit_is_answered_in_json(served: tuple[str, Offsets]) -> None:
    endpoint, offsets = served
    frame = raw_call(endpoint, SPEC.key, encode_body(COMMIT), version=0)
    assert error_of(frame) is ErrorCode.NONE
    assert g.OffsetCommitResponse.model_validate_json(frame.body).topics[0].partitions[0] == (
        g.PartitionError(partition=3)
    )
    [request] = offsets.seen
    assert type(request.body) is g.OffsetCommit and request.ref.api_version == 0
    assert _committed(request) == [("t", 3, 41)]


def test_a_client_falls_back_to_json_on_a_daemon_without_version_1(
    served: tuple[str, Offsets], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon that predates binary bodies: OffsetCommit's newest version is 0.
    monkeypatch.setitem(APIS_BY_KEY, SPEC.key, dataclasses.replace(SPEC, max_version=0))
    endpoint, offsets = served
    with _client(endpoint) as client:
        reply = client.call(0, COMMIT, g.OffsetCommitResponse)
        assert reply.topics[0].partitions == [g.PartitionError(partition=3)]
        assert client.version_for(endpoint, SPEC) == 0
        client.call(0, COMMIT, g.OffsetCommitResponse)  # straight to version 0 now
    # The refused attempt never reached the shard; both commits came as JSON.
    assert [type(r.body) for r in offsets.seen] == [g.OffsetCommit, g.OffsetCommit]
    assert [r.ref.api_version for r in offsets.seen] == [0, 0]


def test_a_malformed_binary_body_is_refused_and_the_listener_serves_on(
    served: tuple[str, Offsets],
) -> None:
    endpoint, offsets = served
    frame = raw_call(endpoint, SPEC.key, encode_body(COMMIT), version=1)  # JSON at version 1
    assert error_of(frame) is ErrorCode.INVALID_REQUEST
    assert frame.message is not None and "malformed OffsetCommit body" in frame.message
    assert offsets.seen == []
    with _client(endpoint) as client:  # the listener serves on
        client.call(0, COMMIT, g.OffsetCommitResponse)
    assert len(offsets.seen) == 1


def test_a_heartbeat_goes_binary_and_its_empty_answer_comes_back(
    served: tuple[str, Offsets],
) -> None:
    endpoint, offsets = served
    beat = g.Heartbeat(group_id="g", generation_id=4, member_id="m", group_instance_id="i")
    with _client(endpoint) as client:
        assert client.call(0, beat, Empty) == Empty()
    frame = raw_call(endpoint, ALL_APIS["Heartbeat"].key, encode_body(beat), version=0)
    assert error_of(frame) is ErrorCode.NONE and frame.body == b"{}"  # an older client's
    binary, json = offsets.seen
    assert type(binary.body) is BinaryHeartbeat and binary.ref.api_version == 1
    assert type(json.body) is g.Heartbeat and json.ref.api_version == 0
    for request in (binary, json):
        body = request.body
        assert isinstance(body, BinaryHeartbeat | g.Heartbeat)
        assert (body.group_id, body.generation_id, body.member_id, body.group_instance_id) == (
            "g",
            4,
            "m",
            "i",
        )


FETCH = g.OffsetFetch(group_id="g", topics=[g.FetchTopic(name="t", partitions=[3, 4])])
JOIN = g.ConsumerGroupHeartbeat(
    group_id="g",
    member_id="m",
    member_epoch=0,
    rebalance_timeout_ms=30_000,
    subscribed_topic_names=["t"],
    topic_partitions=[],
)


@pytest.mark.parametrize(
    ("body", "answer", "binary_type"),
    [(FETCH, FETCHED, BinaryOffsetFetch), (JOIN, ASSIGNED, BinaryConsumerHeartbeat)],
    ids=["OffsetFetch", "ConsumerGroupHeartbeat"],
)
def test_a_fetch_and_a_consumer_heartbeat_go_binary_and_an_older_clients_json_too(
    served: tuple[str, Offsets], body: Body, answer: Body, binary_type: type
) -> None:
    endpoint, offsets = served
    spec = ALL_APIS[type(body).__name__]
    with _client(endpoint) as client:
        assert client.call(0, body, type(answer)) == answer
    frame = raw_call(endpoint, spec.key, encode_body(body), version=0)
    assert error_of(frame) is ErrorCode.NONE
    assert type(answer).model_validate_json(frame.body) == answer  # answered in JSON
    binary, json = offsets.seen
    assert type(binary.body) is binary_type and binary.ref.api_version == 1
    assert type(json.body) is type(body) and json.ref.api_version == 0
    for request in (binary, json):  # the same request, either way
        assert _carried(request.body) == _carried(body)


def _carried(body: object) -> tuple[object, ...]:
    if isinstance(body, g.OffsetFetch | BinaryOffsetFetch):
        assert body.topics is not None
        return body.group_id, [(t.name, list(t.partitions)) for t in body.topics]
    assert isinstance(body, g.ConsumerGroupHeartbeat | BinaryConsumerHeartbeat)
    return (body.group_id, body.member_id, body.member_epoch, body.rebalance_timeout_ms,
            body.subscribed_topic_names, body.topic_partitions)  # fmt: skip
