"""The ops endpoint over real HTTP on 127.0.0.1: /metrics, /health, unknown paths."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from kafkacoord import BUILD
from kafkacoord.coordinator.runtime.host import HostState
from kafkacoord.server.ops import DISABLED_PORT, OpsService, StatusSource
from kafkacoord.server.ops.health import Health, evaluate
from kafkacoord.server.ops.http import OpsServer, ops_app
from kafkacoord.server.ops.probe import BrokerProbe
from kafkacoord.server.ops.status import DaemonStatus


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


class Switch:
    def __init__(self) -> None:
        self.state = HostState.LOADING

    def health(self) -> Health:
        return evaluate(DaemonStatus(node_id=0, started=True, shards={"offsets-0": self.state}))


@pytest.fixture
def served() -> Iterator[tuple[str, Switch]]:
    registry = CollectorRegistry()
    Counter("kafkacoord_test_events", "Events.", registry=registry).inc(3)
    switch = Switch()
    server = OpsServer("127.0.0.1", 0, ops_app(registry, switch.health)).start()
    try:
        yield server.url, switch
    finally:
        server.close()


def test_metrics_in_prometheus_text_format(served: tuple[str, Switch]) -> None:
    url, _ = served
    status, content_type, body = get(f"{url}/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    assert "kafkacoord_test_events_total 3.0" in body.splitlines()


def test_health_follows_the_shards(served: tuple[str, Switch]) -> None:
    url, switch = served
    status, content_type, body = get(f"{url}/health")
    assert (status, content_type) == (503, "application/json")
    assert json.loads(body)["shards"] == {"offsets-0": "LOADING"}
    switch.state = HostState.ACTIVE
    status, _, body = get(f"{url}/health")
    assert status == 200
    assert json.loads(body)["status"] == "ready"


def test_unknown_path_is_404(served: tuple[str, Switch]) -> None:
    url, _ = served
    assert get(f"{url}/nope")[0] == 404


def _service() -> OpsService:
    source = StatusSource(5, started=lambda: False, controller=lambda: None, groups=lambda: None)
    return OpsService(source, loads=dict)


def test_service_port_zero_picks_a_port_and_minus_one_disables() -> None:
    service = _service()
    assert service.serve("127.0.0.1", DISABLED_PORT) is None
    server = service.serve("127.0.0.1", 0)
    try:
        assert server is not None and server.port > 0
        status, _, body = get(f"{server.url}/metrics")
        assert status == 200
        assert 'kafkacoord_build_info{hot_path="' + BUILD.value + '",node_id="5"' in body
        assert "kafkacoord_started 0.0" in body
        assert get(f"{server.url}/health")[0] == 503  # still starting
    finally:
        service.close()


def test_a_port_in_use_does_not_stop_the_daemon() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        service = _service()
        assert service.serve("127.0.0.1", taken.getsockname()[1]) is None
        service.close()


def test_broker_probe_reports_an_unreachable_broker_and_caches_the_answer() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens once the socket closes
    now = [0.0]
    probe = BrokerProbe(f"127.0.0.1:{closed}", timeout_s=0.5, ttl_s=5.0, clock=lambda: now[0])
    started = time.monotonic()
    assert probe.reachable() is False
    assert time.monotonic() - started >= 0.4  # it waited for the broker
    now[0] = 1.0
    started = time.monotonic()
    assert probe.reachable() is False
    assert time.monotonic() - started < 0.2  # within the TTL: the cached answer
