"""Identities on the listener: under mutual TLS only a node's own certificate acts as it,
and without client authentication the daemon serves node and admin calls only on
loopback or when told to (``allow_plaintext_admin``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from kafkacoord.client.admin.controller_admin import read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER, LISTENER_ENDPOINT
from kafkacoord.codecs.models.metadata import NodeValue
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol.controller_api import (
    NodeHeartbeat,
    NodeHeartbeatResponse,
    RegisterNode,
    RegisterNodeResponse,
)
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.wire import ClientTls
from tests.pki import write_pki

from .cluster import DaemonProcess, Replicas, fast_daemon_env, wait_until

pytestmark = pytest.mark.integration

DAEMON = 7  # the daemon's own node id
NODE = 1  # a node agent's
ROOT = Path(__file__).parents[2]


def _subject(cert: Path) -> str:
    """The subject as RFC 4514 writes it (most specific first), as Kafka names principals."""
    return x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA; the daemon's certificate (also its own client's); a node's, an app's, an admin's."""
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    files = write_pki(root, ca, {
        "daemon": ca.issue_cert("127.0.0.1", "localhost", common_name=f"kc-{DAEMON}"),
        "node": ca.issue_cert("node.example", common_name=f"node-{NODE}"),
        "app": ca.issue_cert("app.example", common_name="app"),
        "admin": ca.issue_cert("admin.example", common_name="admin"),
    })  # fmt: skip
    return files


def _as(pki: dict[str, Path], name: str) -> ClientTls:
    return ClientTls(pki["ca"], pki[name], pki[f"{name}-key"])


@dataclass
class Secured:
    daemon: DaemonProcess
    bootstrap: str
    topics: InternalTopics
    metrics_url: str

    def node(self, node_id: int) -> NodeValue | None:
        return read_metadata(self.bootstrap, self.topics.metadata, 30).nodes.get(node_id)

    def authorization_failures(self) -> dict[str, float]:
        url = f"{self.metrics_url}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        return {
            s.labels["api"]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "kafkacoord_authorization_failures_total"
        }


@pytest.fixture
def secured(bootstrap: str, prefix: str, tmp_path: Path, pki: dict[str, Path]) -> Iterator[Secured]:
    """A daemon on mutual TLS: its own certificate maps to its node id, ``node`` to NODE."""
    env = {
        **fast_daemon_env(bootstrap, prefix, 2),
        "KAFKACOORD_NODE_ID": str(DAEMON),
        "KAFKACOORD_DATA_DIR": str(tmp_path / "daemon"),
        "KAFKACOORD_CONSOLE": "false",
        "KAFKACOORD_TLS_CERT": str(pki["daemon"]),
        "KAFKACOORD_TLS_KEY": str(pki["daemon-key"]),
        "KAFKACOORD_TLS_CLIENT_CA": str(pki["ca"]),
        "KAFKACOORD_TLS_CA": str(pki["ca"]),
        "KAFKACOORD_ADMIN_PRINCIPALS": json.dumps([_subject(pki["admin"])]),
        # Kafka's User: prefix is accepted.
        "KAFKACOORD_NODE_PRINCIPALS": json.dumps(
            {f"User:{_subject(pki['daemon'])}": [DAEMON], _subject(pki["node"]): [NODE]}
        ),
    }
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("daemon ready", timeout_s=90)
        metrics = str(daemon.wait_for("metrics and health endpoint listening")["url"])
        yield Secured(daemon, bootstrap, InternalTopics(prefix=prefix), metrics)
    finally:
        daemon.stop()


def _refused(client: CoordinatorClient, body: RegisterNode | NodeHeartbeat) -> RequestError:
    response = RegisterNodeResponse if isinstance(body, RegisterNode) else NodeHeartbeatResponse
    with pytest.raises(RequestError) as info:
        client.call(CONTROLLER, body, response, timeout_s=30)
    return info.value


def test_only_a_nodes_own_certificate_registers_and_heartbeats_as_it(
    secured: Secured, pki: dict[str, Path], prefix: str
) -> None:
    # The daemon's own agent registered with its mapped certificate.
    wait_until(lambda: (n := secured.node(DAEMON)) is not None and not n.fenced, 60, "daemon")
    endpoints = {LISTENER_ENDPOINT: "127.0.0.1:1"}
    agent = NodeAgent(
        secured.bootstrap, node_id=NODE, handler=Replicas(), topic_prefix=prefix,
        endpoints=endpoints, tls=_as(pki, "node"), heartbeat_interval_ms=300,
    ).start(timeout_s=60)  # fmt: skip
    try:
        real = wait_until(lambda: secured.node(NODE), 30, "node registered")
        assert (real.incarnation, real.fenced) == (agent.incarnation, False)
        hijack = RegisterNode(
            node_id=NODE, incarnation="intruder", endpoints={LISTENER_ENDPOINT: "10.6.6.6:1"}
        )
        beat = NodeHeartbeat(node_id=NODE, node_epoch=agent.node_epoch)
        app_subject = _subject(pki["app"])
        with CoordinatorClient(secured.bootstrap, topic_prefix=prefix, tls=_as(pki, "app")) as app:
            for body in (hijack, beat):
                error = _refused(app, body)
                assert error.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                assert app_subject in str(error) and f"as node {NODE}" in str(error)
                assert "not in node_principals" in str(error)
        # An admin is not a node: CLUSTER_ACTION is a right of its own.
        tls = _as(pki, "admin")
        with CoordinatorClient(secured.bootstrap, topic_prefix=prefix, tls=tls) as admin:
            assert _refused(admin, hijack).code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # The node's own certificate acts as its node only.
        tls = _as(pki, "node")
        with CoordinatorClient(secured.bootstrap, topic_prefix=prefix, tls=tls) as node:
            other = RegisterNode(node_id=NODE + 1, incarnation="other")
            error = _refused(node, other)
            assert error.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert f"maps it to node {NODE}" in str(error)
        # Heartbeats go on: the real node is neither fenced nor moved.
        time.sleep(1.0)
        after = secured.node(NODE)
        assert after is not None and not after.fenced and not agent.fenced
        assert (after.incarnation, after.node_epoch) == (agent.incarnation, real.node_epoch)
        assert after.endpoints == endpoints
        assert secured.node(NODE + 1) is None
        failures = secured.authorization_failures()
        assert failures == {"RegisterNode": 3.0, "NodeHeartbeat": 1.0}
    finally:
        agent.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOORD_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_an_open_listener_without_client_authentication_refuses_to_start(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, "-m", "kafkacoord", "daemon", "--listen", f"0.0.0.0:{_free_port()}"]
    env = _cli_env(KAFKACOORD_DATA_DIR=str(tmp_path / "d"), KAFKACOORD_METRICS_PORT="-1")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "allow_plaintext_admin" in done.stderr and "mutual TLS" in done.stderr
    assert not (tmp_path / "d").exists()  # refused before anything started


def test_allow_plaintext_admin_starts_an_open_listener_and_warns(
    bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    env = {
        **fast_daemon_env(bootstrap, prefix, 1),
        "KAFKACOORD_DATA_DIR": str(tmp_path / "d"),
        "KAFKACOORD_LISTEN": f"0.0.0.0:{_free_port()}",
        "KAFKACOORD_ALLOW_PLAINTEXT_ADMIN": "true",
        "KAFKACOORD_CONSOLE": "false",
    }
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("daemon ready", timeout_s=90)
        warnings = [
            e for e in list(daemon.events)
            if e.get("level") == "warning" and "allow_plaintext_admin is set" in e["event"]
        ]  # fmt: skip
        assert len(warnings) == 1, daemon.events[-20:]
    finally:
        daemon.stop()


def test_the_cli_exits_4_when_its_certificate_is_no_admins(
    secured: Secured, pki: dict[str, Path]
) -> None:
    def cli(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = _cli_env(
            KAFKACOORD_BOOTSTRAP=secured.bootstrap, KAFKACOORD_TOPIC_PREFIX=secured.topics.prefix,
            KAFKACOORD_TLS_CA=str(pki["ca"]), KAFKACOORD_TLS_CERT=str(pki[name]),
            KAFKACOORD_TLS_KEY=str(pki[f"{name}-key"]),
        )  # fmt: skip
        argv = [sys.executable, "-m", "kafkacoord", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    wait_until(lambda: (n := secured.node(DAEMON)) is not None and not n.fenced, 60, "daemon")
    create = ("topics", "create", "--topic", "orders", "--partitions", "1")
    refused = cli("app", *create)
    assert refused.returncode == 4, refused.stderr[-2000:]
    assert "it is not in admin_principals" in refused.stderr
    # The admin's certificate is let through: the controller answers about the topic itself
    # (no service node is live to place it on, so that is refused too, for its own reason).
    admitted = cli("admin", *create)
    assert "admin_principals" not in admitted.stderr, admitted.stderr[-2000:]
    assert admitted.returncode == 4 and "replication factor" in admitted.stderr
