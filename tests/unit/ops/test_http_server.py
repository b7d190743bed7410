"""The ops server's limits over real sockets on 127.0.0.1: Host allow-list, malformed and
oversized requests, bounded workers, idle and surplus connections, and a clean stop."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pytest
from prometheus_client import CollectorRegistry

from kafkacoord.server.addresses import is_loopback
from kafkacoord.server.ops.health import Health
from kafkacoord.server.ops.hosts import HostCheck
from kafkacoord.server.ops.http import HttpLimits, OpsServer, ops_app

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment


def _healthy() -> Health:
    return Health(200, {"status": "ready"})


def _request(port: int, path: str = "/", host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _raw(port: int, data: bytes, timeout_s: float = 5) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        return sock.recv(4096)


class Gate:
    """A console stand-in that holds each request until released, counting how many
    it holds at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.inside = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        self.release.wait(10)
        with self._lock:
            self.inside -= 1
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


def _serve(
    limits: HttpLimits, console: Gate | None = None, allowed: tuple[str, ...] = ()
) -> OpsServer:
    app = ops_app(CollectorRegistry(), _healthy, lambda: console,
                  HostCheck("127.0.0.1", allowed))  # fmt: skip
    return OpsServer("127.0.0.1", 0, app, limits).start()


def test_the_host_check_follows_the_bound_address() -> None:
    loopback = HostCheck("127.0.0.1", ["console.example"])
    assert loopback.allows("127.0.0.1:9464") and loopback.allows("localhost")
    assert loopback.allows("[::1]:9464") and loopback.allows("Console.Example.:80")
    assert not loopback.allows("evil.example:9464")
    assert not loopback.allows("") and not loopback.allows(None)
    assert not loopback.allows("127.0.0.1:notaport@evil")
    assert not loopback.allows("127.0.0.1:http") and not loopback.allows("127.0.0.1:99999")
    named = HostCheck("10.1.2.3")
    assert named.allows("10.1.2.3:9464") and not named.allows("localhost:9464")
    wildcard = HostCheck("0.0.0.0", ["kafkacoord-1"])
    assert wildcard.allows("kafkacoord-1:9464") and wildcard.allows("127.0.0.1:9464")
    assert not wildcard.allows("0.0.0.0:9464") and not wildcard.allows("rebound.example")
    assert is_loopback("127.0.0.2") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_a_rebound_host_is_refused_but_metrics_and_health_answer_any_host() -> None:
    console = Gate()
    console.release.set()
    server = _serve(HttpLimits(), console, allowed=("console.example",))
    try:
        status, body = _request(server.port, "/", host=f"rebound.example:{server.port}")
        assert status == 421
        assert b"console_allowed_hosts" in body
        assert _request(server.port, "/", host=f"127.0.0.1:{server.port}") == (200, b"ok")
        assert _request(server.port, "/", host="console.example")[0] == 200
        assert _request(server.port, "/metrics", host="prometheus-target:9464")[0] == 200
        assert _request(server.port, "/health", host="anything")[0] == 200
    finally:
        server.close()


def test_bad_and_huge_content_lengths_are_answered_without_a_worker(gate: Gate) -> None:
    server = _serve(HttpLimits(threads=1, max_body_bytes=1024), gate)
    try:
        negative = _raw(server.port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                     b"Content-Length: -1\r\n\r\n")  # fmt: skip
        assert negative.startswith(b"HTTP/1.1 400")
        huge = _raw(server.port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 b"Content-Length: 1000000000000\r\n\r\n")  # fmt: skip
        assert huge.startswith(b"HTTP/1.1 413")
        assert gate.most == 0  # neither reached the app
    finally:
        server.close()


def test_workers_are_bounded_and_a_slow_client_holds_none(gate: Gate) -> None:
    server = _serve(HttpLimits(threads=2), gate)
    done: list[int] = []
    try:
        # A client that sends half a request: waitress buffers it, no worker waits.
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        callers = [threading.Thread(target=lambda: done.append(_request(server.port)[0]))
                   for _ in range(4)]  # fmt: skip
        for caller in callers:
            caller.start()
        deadline = time.monotonic() + 5
        while gate.inside < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # room for a third to get in, were the pool unbounded
        assert gate.inside == 2
        gate.release.set()
        for caller in callers:
            caller.join(10)
        assert done == [200] * 4
        assert gate.most == 2
        slow.close()
    finally:
        server.close()


def test_idle_connections_are_closed_after_the_channel_timeout() -> None:
    server = _serve(HttpLimits(channel_timeout_s=1))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n")  # never finished
            started = time.monotonic()
            assert sock.recv(4096) == b""  # closed by the server
            assert time.monotonic() - started < 6
    finally:
        server.close()


def test_connections_beyond_the_limit_wait_until_one_closes() -> None:
    server = _serve(HttpLimits(connection_limit=2))
    try:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        time.sleep(0.3)  # both accepted
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=1)
        with extra, pytest.raises(TimeoutError):  # queued, never answered
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            extra.recv(4096)
        for sock in held:
            sock.close()
        assert _request(server.port, "/health")[0] == 200
    finally:
        server.close()


def test_close_stops_serving_and_frees_the_port() -> None:
    server = _serve(HttpLimits())
    idle = socket.create_connection(("127.0.0.1", server.port))
    assert _request(server.port, "/health")[0] == 200
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 3
    assert idle.recv(16) == b""  # its connection was closed too
    idle.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)
