"""deploy/compose.yaml's mutual TLS, run without Docker: its tls-init command writes the
certificates, a real daemon starts with kafkacoord-1's environment (listening on
0.0.0.0), and the examples, the set-up job and the ops CLI present their own
certificates: each may do what its role allows, and another certificate may not."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml  # type: ignore[import-untyped]

from kafkacoord.client.admin.controller_admin import read_metadata
from kafkacoord.coordinator.controller.image import is_live_node
from kafkacoord.storage.broker import free_port
from kafkacoord.storage.topics import InternalTopics

from .cluster import DaemonProcess, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
SERVICES: dict[str, dict[str, Any]] = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())[
    "services"
]
TLS_VOLUME = "tls"
PROCESS_TIMEOUT_S = 90


def _argv(service: dict[str, Any]) -> list[str]:
    return [str(w) for key in ("entrypoint", "command") for w in service.get(key) or []]


def _local_env(name: str, tls_dir: Path) -> dict[str, str]:
    """The service's environment, its mount of the tls volume turned into ``tls_dir``."""
    service = SERVICES[name]
    [mount] = [m for m in service["volumes"] if isinstance(m, dict) and m["source"] == TLS_VOLUME]
    local = str(tls_dir / mount["volume"]["subpath"])
    target = mount["target"]
    env = {str(k): str(v) for k, v in (service.get("environment") or {}).items()}
    return {k: local + v[len(target) :] if v.startswith(target) else v for k, v in env.items()}


class Process:
    """A subprocess whose output lines are collected as they come."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.process = subprocess.Popen(
            argv, env={**os.environ, "PATH": path, **env}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (self.process.stdout, self.process.stderr)
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.append(line.rstrip())

    def wait_for(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in line for line in list(self.lines)):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} line; exit {self.process.poll()}; got {self.lines}")

    def finish(self, timeout_s: float = PROCESS_TIMEOUT_S) -> tuple[int, str]:
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"still running after {timeout_s}s: {self.lines}") from None
        for reader in self._readers:
            reader.join(5)
        return code, "\n".join(self.lines)

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish(30)


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    return Process(argv, env).finish()


@pytest.fixture
def tls_dir(tmp_path: Path) -> Path:
    """The tls-init service's command, run by the real CLI into a directory of the test's."""
    argv = [a for a in _argv(SERVICES["tls-init"]) if not a.startswith("--dir")]
    out = tmp_path / "tls"
    code, output = _run([sys.executable, "-m", "kafkacoord", *argv, f"--dir={out}"], {})
    assert code == 0, output
    assert "issued" in output
    return out


@pytest.fixture
def compose_daemon(
    kafka_bootstrap: str, prefix: str, tmp_path: Path, tls_dir: Path
) -> Iterator[str]:
    """kafkacoord-1 as the compose file runs it, on the embedded Apache Kafka. Only where it
    finds Kafka and its files, its port and the topic prefix differ (one shared broker)."""
    env = _local_env("kafkacoord-1", tls_dir)
    assert env["KAFKACOORD_LISTEN"] == "0.0.0.0:9192"
    assert "KAFKACOORD_ALLOW_PLAINTEXT_ADMIN" not in env
    port = free_port()
    env |= {
        "KAFKACOORD_BOOTSTRAP": kafka_bootstrap,
        "KAFKACOORD_LISTEN": f"0.0.0.0:{port}",
        "KAFKACOORD_ADVERTISED_LISTENER": f"127.0.0.1:{port}",
        "KAFKACOORD_DATA_DIR": str(tmp_path / "node-100"),
        "KAFKACOORD_TOPIC_PREFIX": prefix,
        "KAFKACOORD_METRICS_PORT": "0",
    }
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("daemon ready", timeout_s=120)
        assert not daemon.has("allow_plaintext_admin is set")
        yield kafka_bootstrap
    finally:
        daemon.stop()


def _live(bootstrap: str, prefix: str, node_id: int) -> bool:
    node = read_metadata(bootstrap, InternalTopics(prefix=prefix).metadata, 30).node(node_id)
    return node is not None and is_live_node(node)


def _client_env(name: str, tls_dir: Path, bootstrap: str, prefix: str) -> dict[str, str]:
    return _local_env(name, tls_dir) | {
        "KAFKACOORD_BOOTSTRAP": bootstrap,
        "KAFKACOORD_TOPIC_PREFIX": prefix,
    }


def _example(name: str, bootstrap: str, prefix: str) -> list[str]:
    """The compose service's command, the examples' path and the broker made local."""
    argv = _argv(SERVICES[name])
    script = ROOT / "examples" / Path(argv[1]).name
    args = [bootstrap if prev == "--bootstrap" else a for prev, a in itertools.pairwise(argv)][1:]
    return [sys.executable, str(script), *args, "--topic-prefix", prefix]


def test_compose_services_act_only_as_their_certificates_allow(
    compose_daemon: str, tls_dir: Path, prefix: str
) -> None:
    bootstrap = compose_daemon
    # The daemon registered itself as node 100 with its own certificate.
    wait_until(lambda: _live(bootstrap, prefix, 100), 60, "the daemon's own node")

    # The example service, with its certificate, registers as node 1 (its compose health
    # check agrees).
    service_env = _client_env("replicated-service", tls_dir, bootstrap, prefix)
    service = Process(_example("replicated-service", bootstrap, prefix), service_env)
    try:
        service.wait_for("node 1 registered")
        wait_until(lambda: _live(bootstrap, prefix, 1), 30, "node 1")
        health = [sys.executable, str(ROOT / "deploy/healthcheck.py"),
                  *SERVICES["replicated-service"]["healthcheck"]["test"][2:]]  # fmt: skip
        assert health[2:] == ["node", "1"]
        assert _run(health, service_env) == (0, "")

        # The same program with the group worker's certificate may not be node 1, nor 2.
        worker_env = _client_env("group-worker", tls_dir, bootstrap, prefix)
        for node_id in ("1", "2"):
            argv = _example("replicated-service", bootstrap, prefix)
            argv[argv.index("--node-id") + 1] = node_id
            code, output = _run(argv, worker_env)
            assert code != 0, output
            assert (
                f"principal 'CN=group-worker' may not call RegisterNode as node {node_id} "
                "(CLUSTER_ACTION): it is not in node_principals"
            ) in output
        assert _live(bootstrap, prefix, 1)  # the real node 1 was not fenced

        # A topic: refused to the worker's certificate, created by kv-topic's own command.
        # Refused by the listener: exit code 4 (docs/operations.md, "Exit codes").
        create = ["kafkacoord", "topics", "create", "--topic", "other", "--partitions", "1"]
        code, output = _run(create, worker_env)
        assert code == 4 and "'CN=group-worker' may not call CreateTopic" in output, output
        kv_topic = _argv(SERVICES["kv-topic"])
        assert kv_topic[:2] == ["sh", "-c"]
        setup_env = _client_env("kv-topic", tls_dir, bootstrap, prefix)
        assert _run(kv_topic, setup_env)[0] == 0
        service.wait_for("leading   kv-0")
        assert _run(kv_topic, setup_env)[0] == 0  # a rerun finds it there

        # The operator's CLI, with the ops certificate, creates one too.
        ops_env = _client_env("ops", tls_dir, bootstrap, prefix)
        code, output = _run([*create[:-2], "--replica-assignment", "1"], ops_env)
        assert code == 0, output
        code, output = _run(["kafkacoord", "topics", "describe", "--topic", "other"], ops_env)
        assert code == 0 and "other" in output, output
    finally:
        code, output = service.stop()
    assert code == 0, output
    assert "leaderships moved away" in output
