"""Requests and replies over real Kafka topics: round trip, retries, bad input."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from kafkacoord.coordinator.protocol import CONTROLLER_APIS, Empty, ErrorCode
from kafkacoord.coordinator.protocol.controller_api import FenceNode, RegisterNode
from kafkacoord.coordinator.runtime.shard import Reply, Request
from kafkacoord.coordinator.transport import (
    ReplySender,
    RequestClient,
    RequestError,
    RequestReceiver,
)
from kafkacoord.coordinator.transport.envelope import encode_request
from kafkacoord.storage.topics import InternalTopics

pytestmark = pytest.mark.integration


class EchoServer:
    """Answers FenceNode with Empty; fails the first ``flaky`` attempts retriably."""

    def __init__(self, bootstrap: str, topics: InternalTopics, flaky: int = 0) -> None:
        self.seen: list[Request] = []
        self.flaky = flaky
        self.replies = ReplySender(bootstrap, topics.responses, client_id="echo-replies")
        self.receiver = RequestReceiver(
            bootstrap, topics.controller_requests, CONTROLLER_APIS, self._dispatch,
            self.replies, client_id="echo",
        )  # fmt: skip
        self.receiver.assign([0])

    def _dispatch(self, partition: int, request: Request) -> None:
        self.seen.append(request)
        if self.flaky > 0:
            self.flaky -= 1
            self.replies.send([Reply(request.ref, request.api, ErrorCode.NOT_CONTROLLER)])
            return
        self.replies.send([Reply(request.ref, request.api, body=Empty())])

    def close(self) -> None:
        self.receiver.close()
        self.replies.close()


@pytest.fixture
def server(bootstrap: str, topics: InternalTopics, client: RequestClient) -> Iterator[EchoServer]:
    """An echo server that is already serving."""
    echo = EchoServer(bootstrap, topics)
    try:
        # The receiver starts at the log end once assigned; early requests are resent.
        client.call(topics.controller_requests, 0, "FenceNode", FenceNode(node_id=1), timeout_s=30)
        yield echo
    finally:
        echo.close()


def test_round_trip_and_latency(
    topics: InternalTopics, client: RequestClient, server: EchoServer
) -> None:
    samples = []
    for i in range(100):
        started = time.perf_counter()
        reply = client.call(topics.controller_requests, 0, "FenceNode", FenceNode(node_id=i))
        samples.append(time.perf_counter() - started)
        assert reply == Empty()
    p50 = statistics.median(samples)
    print(f"round trip p50 {p50 * 1000:.1f} ms")
    assert p50 < 0.25  # generous: the latency goal lives in bench/, this catches hangs
    ids = [r.body.node_id for r in server.seen[-100:]]  # type: ignore[attr-defined]
    assert ids == list(range(100))


def test_retriable_errors_are_retried_with_the_same_correlation_id(
    topics: InternalTopics, client: RequestClient, server: EchoServer
) -> None:
    server.flaky = 2
    before = len(server.seen)
    client.call(topics.controller_requests, 0, "FenceNode", FenceNode(node_id=7))
    attempts = server.seen[before:]
    assert len(attempts) == 3
    assert len({a.ref.correlation_id for a in attempts}) == 1


def test_no_server_times_out_with_a_clear_error(
    topics: InternalTopics, client: RequestClient
) -> None:
    with pytest.raises(RequestError) as info:
        client.call(topics.controller_requests, 0, "FenceNode", FenceNode(node_id=1), timeout_s=1.5,
                    attempt_timeout_s=0.5)  # fmt: skip
    assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
    assert "no reply" in str(info.value)


def test_malformed_and_poison_requests_get_errors_not_crashes(
    bootstrap: str, topics: InternalTopics, client: RequestClient, server: EchoServer
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topics.controller_requests, b"\x00garbage", b"\x14\x01junk", 0)
    producer.produce(topics.controller_requests, b"v", None, 0)
    producer.flush(10)
    # A well-framed envelope whose body fails validation is answered INVALID_REQUEST.
    with pytest.raises(RequestError) as info:
        client.call(topics.controller_requests, 0, "RegisterNode",
                    FenceNode(node_id=1))  # fmt: skip
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "RegisterNode" in str(info.value)
    with pytest.raises(RequestError) as unknown:
        client.call(topics.controller_requests, 0, "NoSuchApi", FenceNode(node_id=1))
    assert unknown.value.code is ErrorCode.INVALID_REQUEST
    deadline = time.monotonic() + 10
    while server.receiver.poison < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.receiver.poison == 2
    # And the server still serves.
    assert client.call(topics.controller_requests, 0, "FenceNode", FenceNode(node_id=2)) == Empty()


def test_expired_requests_are_dropped(
    bootstrap: str, topics: InternalTopics, client: RequestClient, server: EchoServer
) -> None:
    before = server.receiver.expired
    key, value = encode_request(
        "old-client", 1, "RegisterNode", RegisterNode(node_id=1, incarnation="x"),
        reply_to=0, timeout_ms=1000, sent_ms=int(time.time() * 1000) - 60_000,
    )  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topics.controller_requests, value, key, 0)
    producer.flush(10)
    deadline = time.monotonic() + 10
    while server.receiver.expired == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.receiver.expired == before + 1
    assert all(r.ref.client_id != "old-client" for r in server.seen)


def test_concurrent_callers_share_one_client(
    topics: InternalTopics, client: RequestClient, server: EchoServer
) -> None:
    errors: list[Exception] = []

    def worker(base: int) -> None:
        try:
            for i in range(20):
                client.call(topics.controller_requests, 0, "FenceNode",
                            FenceNode(node_id=base + i))  # fmt: skip
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    served = {r.body.node_id for r in server.seen}  # type: ignore[attr-defined]
    assert {k * 100 + i for k in range(8) for i in range(20)} <= served
