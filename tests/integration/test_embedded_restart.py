"""The embedded default keeps its state: kill -9 the daemon during a storm, many times.

In embedded mode the daemon owns a broker that keeps nothing on restart (tansu,
``memory://``), so the daemon's synced cache is the durable copy and a fresh broker
is re-seeded from it. Every acknowledged commit, topic and node registration must
be there after each restart, the broker must come back on the same port, and no
broker may outlive its daemon. The embedded Apache Kafka keeps its own log dir;
it runs the same checks with fewer kills, because a JVM start costs seconds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kafkacoord.storage.topics import InternalTopics

from .cluster import DaemonProcess, wait_until
from .storm import GROUPS, Acknowledged, check
from .storm import storm as run_storm

pytestmark = pytest.mark.integration

NODE = 7
SHARDS = 4
TOPICS = InternalTopics(offsets_partitions=SHARDS)
# Kills at random points in a commit storm; seven on tansu (each restart costs ~12 s).
KILLS = {"tansu": 7, "kafka": 2}


def _env(data_dir: Path, kind: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKACOORD_BOOTSTRAP"}
    return {
        **env,
        "KAFKACOORD_DATA_DIR": str(data_dir),
        "KAFKACOORD_NODE_ID": str(NODE),
        "KAFKACOORD_OFFSETS_PARTITIONS": str(SHARDS),
        "KAFKACOORD_EMBEDDED_BROKER": kind,
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_CONTROLLER_SESSION_TIMEOUT_MS": "3000",
        "KAFKACOORD_NODE_SESSION_TIMEOUT_MS": "3000",
        "KAFKACOORD_NODE_HEARTBEAT_INTERVAL_MS": "500",
    }


class Daemon:
    def __init__(self, data_dir: Path, kind: str) -> None:
        self.data_dir, self.kind = data_dir, kind
        self.process: DaemonProcess | None = None

    def start(self) -> str:
        self.process = DaemonProcess(_env(self.data_dir, self.kind))
        self.process.wait_for("node registered", timeout_s=180)
        return (self.data_dir / "bootstrap").read_text().strip()

    def broker_pid(self) -> int:
        return int(json.loads((self.data_dir / "embedded-broker.json").read_text())["pid"])

    def kill(self) -> None:
        assert self.process is not None
        self.process.process.send_signal(signal.SIGKILL)
        self.process.process.wait(30)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.fixture
def daemon(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Daemon]:
    running = Daemon(tmp_path / "data", request.param)
    yield running
    running.stop()


@pytest.mark.parametrize("daemon", ["tansu", "kafka"], indirect=True)
def test_kill_9_storms_lose_nothing_acknowledged(daemon: Daemon) -> None:
    acked = Acknowledged()
    rng = random.Random(18)
    bootstrap = daemon.start()
    for round_ in range(KILLS[daemon.kind]):
        stop = threading.Event()
        storm = threading.Thread(
            target=run_storm, args=(bootstrap, TOPICS, NODE, acked, stop, round_)
        )
        storm.start()
        time.sleep(rng.uniform(1.0, 2.5))
        broker = daemon.broker_pid()
        daemon.kill()
        stop.set()
        storm.join(60)
        assert not storm.is_alive()
        wait_until(partial(_gone, broker), timeout_s=30, what=f"broker {broker} to die with it")
        restarted = daemon.start()
        assert restarted == bootstrap, "the embedded broker came back on another port"
        check(bootstrap, TOPICS, NODE, acked)
    assert len(acked.offsets) == len(GROUPS)
    assert acked.topics, "the storm created no topic"
