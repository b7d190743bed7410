"""The listener and its clients over real sockets: pipelining, retries, bad frames, limits, TLS."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from cryptography import x509

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER, StaticRoutes
from kafkacoord.coordinator.protocol import ALL_APIS, Empty, ErrorCode
from kafkacoord.coordinator.protocol.controller_api import (
    CreateTopic,
    CreateTopicResponse,
    FenceNode,
    ReplicaStatus,
)
from kafkacoord.coordinator.runtime.shard import Reply, Request
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.wire import ClientTls, Listener, ListenerLimits, server_context
from kafkacoord.wire.frames import RequestHeader, encode_request
from tests.pki import write_pki
from tests.rawwire import closed_by_peer, connect, raw_call, read_response

pytestmark = pytest.mark.integration

FENCE = ALL_APIS["FenceNode"].key
CREATE = ALL_APIS["CreateTopic"].key


class Echo:
    """A controller target: answers FenceNode with Empty, CreateTopic with its name.

    ``flaky`` first answers are NOT_CONTROLLER; ``drop_first`` closes the connection of
    the first request instead of answering; ``park`` holds requests until released.
    """

    def __init__(self) -> None:
        self.seen: list[Request] = []
        self.flaky = 0
        self.drop_first = False
        self.park = False
        self.parked: list[Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> None:
        with self._lock:
            self.seen.append(request)
            if self.park:
                self.parked.append(request)
                return
            if self.drop_first:
                self.drop_first = False
                channel = request.ref.channel
                channel._conn.close()  # type: ignore[union-attr]
                return
            if self.flaky > 0:
                self.flaky -= 1
                reject(request, ErrorCode.NOT_CONTROLLER)
                return
        self.answer(request)

    @staticmethod
    def answer(request: Request) -> None:
        body = request.body
        reply_body = (
            CreateTopicResponse(topic_id=body.name, assignment={})
            if isinstance(body, CreateTopic)
            else Empty()
        )
        assert request.ref.channel is not None
        request.ref.channel.deliver([Reply(request.ref, request.api, body=reply_body)])

    def release(self) -> None:
        with self._lock:
            parked, self.parked, self.park = self.parked, [], False
        for request in parked:
            self.answer(request)


def _no_groups(requests: list[tuple[int, Request]]) -> None:
    for _, request in requests:
        reject(request, ErrorCode.NOT_COORDINATOR)


Serve = Callable[..., tuple[Listener, Echo]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts listeners with an echo controller; closes them all afterwards."""
    listeners: list[Listener] = []

    def start(
        limits: ListenerLimits | None = None,
        tls: object = None,
        admins: list[str] | None = None,
        nodes: dict[str, list[int]] | None = None,
    ) -> tuple[Listener, Echo]:
        echo = Echo()
        dispatcher = RequestDispatcher(
            echo, _no_groups, admin_principals=admins, node_principals=nodes
        )
        listener = Listener(
            "127.0.0.1",
            0,
            dispatcher,
            limits=limits,
            ssl_context=tls,  # type: ignore[arg-type]
        ).start()
        listeners.append(listener)
        return listener, echo

    yield start
    for listener in listeners:
        listener.close()


def _client(endpoint: str, **kw: object) -> CoordinatorClient:
    return CoordinatorClient(
        "unused:9092",
        routes=StaticRoutes({CONTROLLER: endpoint}),
        **kw,  # type: ignore[arg-type]
    )


def test_concurrent_callers_pipeline_on_one_connection(serve: Serve) -> None:
    listener, echo = serve()
    errors: list[BaseException] = []
    with _client(listener.endpoint) as client:

        def worker(base: int) -> None:
            try:
                for i in range(50):
                    assert client.call(CONTROLLER, FenceNode(node_id=base + i), Empty) == Empty()
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
    served = sorted(r.body.node_id for r in echo.seen)  # type: ignore[attr-defined]
    assert served == sorted(k * 1000 + i for k in range(8) for i in range(50))
    assert listener.stats.accepted == 1  # every caller shared one connection


def test_retriable_errors_are_retried_with_the_same_correlation_id(serve: Serve) -> None:
    listener, echo = serve()
    echo.flaky = 2
    with _client(listener.endpoint) as client:
        client.call(CONTROLLER, FenceNode(node_id=7), Empty)
    assert len(echo.seen) == 3
    assert len({(r.ref.client_id, r.ref.correlation_id) for r in echo.seen}) == 1


def test_a_lost_connection_is_reopened_and_the_call_retried(serve: Serve) -> None:
    listener, echo = serve()
    echo.drop_first = True
    with _client(listener.endpoint) as client:
        assert client.call(CONTROLLER, FenceNode(node_id=1), Empty, timeout_s=10) == Empty()
    assert len(echo.seen) == 2
    assert echo.seen[0].ref.correlation_id == echo.seen[1].ref.correlation_id
    assert listener.stats.accepted == 2


def test_no_listener_gives_a_timeout_naming_the_endpoint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
    with _client(endpoint) as client, pytest.raises(RequestError) as info:
        client.call(CONTROLLER, FenceNode(node_id=1), Empty, timeout_s=1.0)
    assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
    assert endpoint in str(info.value)


def test_an_unanswered_call_times_out_naming_the_endpoint(serve: Serve) -> None:
    listener, echo = serve()
    echo.park = True
    with _client(listener.endpoint) as client, pytest.raises(RequestError) as info:
        client.call(CONTROLLER, FenceNode(node_id=1), Empty, timeout_s=1.0, attempt_timeout_s=0.4)
    assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
    assert f"from {listener.endpoint}" in str(info.value)


def _frame(api_key: int, body: bytes, *, version: int = 0, cid: int = 5) -> bytes:
    return encode_request(RequestHeader(api_key, version, cid, -1, "raw"), body)


@pytest.mark.parametrize(
    ("name", "frame", "code", "text"),
    [
        ("unknown api", _frame(999, b"{}"), ErrorCode.INVALID_REQUEST, "unknown api key 999"),
        ("unknown version", _frame(FENCE, b'{"node_id": 1}', version=9),
         ErrorCode.UNSUPPORTED_VERSION, "FenceNode v9 is not supported"),
        ("malformed body", _frame(CREATE, b'{"name": "x", "num_partitions": "many"'),
         ErrorCode.INVALID_REQUEST, "malformed CreateTopic body"),
        ("field of the wrong type", _frame(CREATE, b'{"name": "x", "rack_aware": "maybe"}'),
         ErrorCode.INVALID_REQUEST, "malformed CreateTopic body"),
        ("oversize frame", struct.pack(">i", 5_000_000) + _frame(FENCE, b"{}")[4:],
         ErrorCode.INVALID_REQUEST, "exceeds max_frame_bytes=1048576"),
    ],
)  # fmt: skip
def test_a_bad_frame_is_answered_then_closed_and_others_are_served(
    serve: Serve, name: str, frame: bytes, code: ErrorCode, text: str
) -> None:
    listener, echo = serve()
    with _client(listener.endpoint) as client:
        client.call(CONTROLLER, FenceNode(node_id=1), Empty)  # a healthy connection, open
        with connect(listener.endpoint) as bad:
            bad.sendall(frame)
            response = read_response(bad)
            assert (response.correlation_id, ErrorCode(response.error_code)) == (5, code)
            assert text in (response.message or "")
            assert closed_by_peer(bad)
        assert client.call(CONTROLLER, FenceNode(node_id=2), Empty) == Empty()
    assert [r.body.node_id for r in echo.seen] == [1, 2]  # type: ignore[attr-defined]
    # Counted once, as what it was: the daemon's own close is no client leaving mid-frame.
    assert "closed mid-frame" not in listener.stats.bad_frames


def test_garbage_and_cut_frames_close_only_their_connection(serve: Serve) -> None:
    listener, echo = serve()
    with connect(listener.endpoint) as garbage:
        garbage.sendall(b"\x00\x00\x00\x03abc")  # too short for a header
        assert closed_by_peer(garbage)
    with connect(listener.endpoint) as cut:
        cut.sendall(_frame(FENCE, b'{"node_id": 3}')[:9])  # then the client goes away
    deadline = time.monotonic() + 10
    while "closed mid-frame" not in listener.stats.bad_frames and time.monotonic() < deadline:
        time.sleep(0.02)
    assert listener.stats.bad_frames == {"undecodable header": 1, "closed mid-frame": 1}
    assert raw_call(listener.endpoint, FENCE, b'{"node_id": 4}').error_code == 0
    assert [r.body.node_id for r in echo.seen] == [4]  # type: ignore[attr-defined]


def test_fuzzed_frames_never_stop_the_listener(serve: Serve) -> None:
    listener, echo = serve(ListenerLimits(max_frame_bytes=4096))
    rng = random.Random(20261125)
    valid = _frame(FENCE, b'{"node_id": 1}')
    for i in range(300):
        kind = i % 3
        if kind == 0:  # random bytes
            data = rng.randbytes(rng.randrange(1, 64))
        elif kind == 1:  # a valid frame with bytes flipped
            raw = bytearray(valid)
            for _ in range(rng.randrange(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            data = bytes(raw)
        else:  # a well-sized frame around random bytes
            body = rng.randbytes(rng.randrange(0, 40))
            data = struct.pack(">i", len(body)) + body
        with connect(listener.endpoint) as sock:
            sock.sendall(data)
    response = raw_call(listener.endpoint, FENCE, b'{"node_id": 99}')
    assert response.error_code == 0
    assert any(r.body.node_id == 99 for r in echo.seen)  # type: ignore[attr-defined]
    assert listener.loop is not None and listener.loop.is_running()


def test_connections_beyond_max_connections_are_refused(serve: Serve) -> None:
    listener, _ = serve(ListenerLimits(max_connections=2))
    with connect(listener.endpoint) as a, connect(listener.endpoint) as b:
        for sock in (a, b):
            sock.sendall(_frame(FENCE, b'{"node_id": 1}'))
            assert read_response(sock).error_code == 0
        with connect(listener.endpoint) as third:
            assert closed_by_peer(third)
    assert listener.stats.refused == 1


def test_idle_connections_are_closed(serve: Serve) -> None:
    listener, _ = serve(ListenerLimits(connections_max_idle_ms=200))
    with connect(listener.endpoint) as idle:
        assert closed_by_peer(idle, timeout_s=10)


def test_a_connection_with_too_many_requests_in_flight_stops_being_read(serve: Serve) -> None:
    listener, echo = serve(ListenerLimits(max_inflight_per_connection=4))
    echo.park = True
    with connect(listener.endpoint) as sock:
        sock.sendall(b"".join(_frame(FENCE, b'{"node_id": %d}' % i, cid=i) for i in range(10)))
        time.sleep(0.5)  # the listener had time to read all ten if it wanted to
        assert len(echo.seen) == 4
        echo.release()
        answered = {read_response(sock).correlation_id for _ in range(10)}
    assert answered == set(range(10))
    assert len(echo.seen) == 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1, and two client certificates."""
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    files = write_pki(root, ca, {
        "server": ca.issue_cert("127.0.0.1", "localhost"),
        "admin": ca.issue_cert("admin.example", common_name="admin"),
        "app": ca.issue_cert("app.example", common_name="app"),
    })  # fmt: skip
    return files


def test_tls_listener_serves_a_client_that_trusts_its_ca(
    serve: Serve, pki: dict[str, Path]
) -> None:
    listener, echo = serve(tls=server_context(pki["server"], pki["server-key"]))
    with _client(listener.endpoint, tls=ClientTls(pki["ca"])) as client:
        assert client.call(CONTROLLER, FenceNode(node_id=1), Empty) == Empty()
    with _client(listener.endpoint) as plain, pytest.raises(RequestError):
        plain.call(CONTROLLER, FenceNode(node_id=2), Empty, timeout_s=1.5, attempt_timeout_s=0.5)
    assert [r.body.node_id for r in echo.seen] == [1]  # type: ignore[attr-defined]


def test_mutual_tls_lets_only_admin_principals_mutate(serve: Serve, pki: dict[str, Path]) -> None:
    tls = server_context(pki["server"], pki["server-key"], client_ca=pki["ca"])
    admins = ["User:" + _subject(pki["admin"])]
    listener, echo = serve(tls=tls, admins=admins)
    create = CreateTopic(name="orders", num_partitions=1, replication_factor=1)
    as_app = ClientTls(pki["ca"], pki["app"], pki["app-key"])
    as_admin = ClientTls(pki["ca"], pki["admin"], pki["admin-key"])
    with _client(listener.endpoint, tls=as_app) as app:
        with pytest.raises(RequestError) as info:
            app.call(CONTROLLER, create, CreateTopicResponse)
        assert info.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED  # Kafka's, per topic
        assert "not in admin_principals" in str(info.value)
        with pytest.raises(RequestError) as info:
            app.call(CONTROLLER, FenceNode(node_id=2), Empty)
        assert info.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with _client(listener.endpoint, tls=as_admin) as admin:
        assert admin.call(CONTROLLER, create, CreateTopicResponse).topic_id == "orders"
    without_cert = ClientTls(pki["ca"])
    with _client(listener.endpoint, tls=without_cert) as anonymous, pytest.raises(RequestError):
        anonymous.call(
            CONTROLLER, FenceNode(node_id=2), Empty, timeout_s=1.5, attempt_timeout_s=0.5
        )
    assert [r.api for r in echo.seen] == ["CreateTopic"]


def test_mutual_tls_lets_a_node_act_only_as_the_nodes_it_is_mapped_to(
    serve: Serve, pki: dict[str, Path]
) -> None:
    tls = server_context(pki["server"], pki["server-key"], client_ca=pki["ca"])
    admin = _subject(pki["admin"])
    listener, echo = serve(tls=tls, admins=[admin], nodes={"User:" + _subject(pki["app"]): [1]})
    as_app = ClientTls(pki["ca"], pki["app"], pki["app-key"])
    as_admin = ClientTls(pki["ca"], pki["admin"], pki["admin-key"])

    def status(node_id: int) -> ReplicaStatus:
        return ReplicaStatus(node_id=node_id, node_epoch=1, topic="t", partition=0,
                             leader_epoch=0, caught_up=True)  # fmt: skip

    with _client(listener.endpoint, tls=as_app) as app:
        with pytest.raises(RequestError) as info:
            app.call(CONTROLLER, status(2), Empty)
        assert info.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "may not call ReplicaStatus as node 2" in str(info.value)
        # A refusal answers that request alone: the connection serves on.
        assert app.call(CONTROLLER, status(1), Empty) == Empty()
    with _client(listener.endpoint, tls=as_admin) as operator:
        with pytest.raises(RequestError) as info:
            operator.call(CONTROLLER, status(1), Empty)
        assert info.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert repr(admin) in str(info.value) and "not in node_principals" in str(info.value)
    assert listener.stats.accepted == 2  # one connection each, none closed by a refusal
    assert [r.body.node_id for r in echo.seen] == [1]  # type: ignore[attr-defined]
    refused = listener.handler.stats.refused  # type: ignore[attr-defined]
    assert refused == {("ReplicaStatus", "unauthorized"): 2}


def _subject(cert: Path) -> str:
    """The subject as RFC 4514 writes it (most specific first), as Kafka names principals."""
    return x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string()
