"""The examples stop cleanly on SIGTERM: within seconds, one line, no traceback,
with the daemon alive and with the daemon gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO

import pytest

from .cluster import DaemonProcess, fast_daemon_env, start_daemon

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"
STOP_WITHIN_S = 12  # the longest wait inside is a 5 s request timeout


class Example:
    def __init__(self, script: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(
                target=self._read, args=(self.process.stdout, self.lines), daemon=True
            ),
            threading.Thread(
                target=self._read, args=(self.process.stderr, self.errors), daemon=True
            ),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        for line in stream:
            into.append(line.rstrip())

    def wait_for(self, prefix: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.process.poll() is None:
            if any(line.startswith(prefix) for line in self.lines):
                return
            time.sleep(0.05)
        raise AssertionError(f"no {prefix!r} line; got {self.lines}")

    def terminate(self) -> tuple[float, str]:
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"running {STOP_WITHIN_S}s after SIGTERM: {self.lines}") from None
        seconds = time.monotonic() - started
        for reader in self._readers:
            reader.join(5)
        return seconds, "\n".join(self.errors)


@pytest.mark.parametrize("daemon_alive", [True, False], ids=["daemon-alive", "daemon-gone"])
def test_examples_stop_cleanly(bootstrap: str, tmp_path: Path, daemon_alive: bool) -> None:
    prefix = f"ex{uuid.uuid4().hex[:8]}_"
    daemon: DaemonProcess = start_daemon(fast_daemon_env(bootstrap, prefix, 50), tmp_path, 1)
    try:
        daemon.wait_for("node registered")
        common = ["--bootstrap", bootstrap, "--topic-prefix", prefix]
        service = Example("replicated_service.py", "--node-id", "11", *common)
        worker = Example("group_worker.py", "--group", "g", "--topic", "events", *common)
        service.wait_for("node 11 registered")
        if not daemon_alive:
            daemon.kill()
        for example, expected in ((service, "stopping: "), (worker, "stopping: left group g")):
            seconds, stderr = example.terminate()
            assert example.process.returncode == 0, stderr
            assert "Traceback" not in stderr, stderr
            stops = [line for line in example.lines if line.startswith("stopping: ")]
            assert len(stops) == 1 and stops[0].startswith(expected), example.lines
            assert seconds < STOP_WITHIN_S
        if daemon_alive:
            assert any("leaderships moved away" in line for line in service.lines)
        else:
            assert any("no controlled shutdown" in line for line in service.lines)
    finally:
        daemon.stop()
