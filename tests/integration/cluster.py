"""Test harness for clusters: daemons as processes, node agents in process."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kafkacoord.client.agent import NodeAgent
from kafkacoord.codecs.models import PartitionValue

T = TypeVar("T")


class DaemonProcess:
    """``python -m kafkacoord daemon`` with JSON logs collected line by line."""

    def __init__(self, env: dict[str, str], module: str = "kafkacoord") -> None:
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, "daemon"],
            env={**os.environ, **env},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            try:
                self.events.append(json.loads(line))
            except json.JSONDecodeError:
                self.events.append({"event": line.rstrip()})

    def wait_for(self, event: str, timeout_s: float = 60, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for entry in list(self.events):
                if entry.get("event") == event and all(
                    entry.get(k) == v for k, v in fields.items()
                ):
                    return entry
            if self.process.poll() is not None:
                # The reader may still hold the last lines (a crash's traceback among them).
                self._reader.join(5)
                break
            time.sleep(0.01)
        code = self.process.poll()
        died = "running" if code is None else f"exited with {code}"
        raise AssertionError(f"no {event!r} event; daemon {died}; log: {self.events[-40:]}")

    def has(self, event: str) -> bool:
        return any(e.get("event") == event for e in list(self.events))

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def fast_daemon_env(bootstrap: str, prefix: str, offsets_partitions: int) -> dict[str, str]:
    """Daemon settings for tests: JSON logs and short sessions, so failovers take seconds."""
    return {
        "KAFKACOORD_BOOTSTRAP": bootstrap,
        "KAFKACOORD_TOPIC_PREFIX": prefix,
        "KAFKACOORD_OFFSETS_PARTITIONS": str(offsets_partitions),
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_CONTROLLER_SESSION_TIMEOUT_MS": "3000",
        "KAFKACOORD_NODE_SESSION_TIMEOUT_MS": "3000",
        "KAFKACOORD_NODE_HEARTBEAT_INTERVAL_MS": "500",
        # Several daemons per host: each picks free ports.
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
    }


def start_daemon(env: dict[str, str], root: Path, node: int) -> DaemonProcess:
    return DaemonProcess({**env, "KAFKACOORD_NODE_ID": str(node),
                          "KAFKACOORD_DATA_DIR": str(root / f"d{node}")})  # fmt: skip


def wait_until(check: Callable[[], T | None], timeout_s: float = 60, what: str = "") -> T:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or check}; last: {last!r}")


class Replicas:
    """A service's replica callbacks, recorded; followers report caught up at once."""

    def __init__(self) -> None:
        self.agent: NodeAgent | None = None
        self.roles: dict[tuple[str, int], str] = {}
        self.log: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
        with self._lock:
            self.roles[(topic, partition)] = "leader"
            self.log.append(("leader", topic, partition))

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
        with self._lock:
            self.roles[(topic, partition)] = "follower"
            self.log.append(("follower", topic, partition))
        agent = self.agent
        if agent is not None and agent.node_id not in state.isr and state.leader >= 0:
            threading.Thread(target=self._caught_up, args=(topic, partition), daemon=True).start()

    def _caught_up(self, topic: str, partition: int) -> None:
        assert self.agent is not None
        # A failed report is retried by the next leadership change.
        with contextlib.suppress(Exception):
            self.agent.report_caught_up(topic, partition)

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
        with self._lock:
            self.roles.pop((topic, partition), None)
            self.log.append(("stop", topic, partition))

    def leading(self) -> set[tuple[str, int]]:
        with self._lock:
            return {tp for tp, role in self.roles.items() if role == "leader"}
