"""What a daemon remembers of its embedded broker: a stale broker is stopped, and only a broker."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kafkacoord.server import embedded
from kafkacoord.storage.broker import EmbeddedBroker

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_stale_broker_is_stopped_and_its_port_offered_again(tmp_path: Path) -> None:
    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log").start()
    try:
        assert broker.pid is not None
        embedded.remember(tmp_path, embedded.BrokerRecord("tansu", broker.port, broker.pid))
        previous = embedded.remembered(tmp_path)
        assert previous == embedded.BrokerRecord("tansu", broker.port, broker.pid)
        # While it runs, its port is taken: nobody else may be offered it.
        assert embedded.choose_port(None, previous, "tansu") is None
        assert embedded.stop_stale(previous)
        deadline = time.monotonic() + 10
        while _alive(broker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(broker.pid)
        assert embedded.choose_port(None, previous, "tansu") == broker.port
        assert embedded.choose_port(4321, previous, "tansu") == 4321  # configured wins
        assert embedded.choose_port(None, previous, "kafka") is None  # another kind's port
    finally:
        broker.stop()


def test_a_pid_that_is_not_a_broker_is_never_signalled(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        record = embedded.BrokerRecord("tansu", 1, other.pid)
        assert not embedded.stop_stale(record)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
    assert embedded.remembered(tmp_path) is None  # nothing written: nothing remembered
