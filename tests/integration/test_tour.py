"""README's five-minute tour, run as written: the bash block between its markers.

The block runs against a daemon on the embedded default, from a directory laid out
like the repository root. Where the tour says to restart the daemon, the test
does it (SIGINT, then a new daemon on the same data directory) and runs the rest.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster import DaemonProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
RESTART = "# Restart the daemon"


def tour_block() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- tour:start -->\n```bash\n(.*?)```\n<!-- tour:end -->", text, re.S)
    assert block is not None, "README has no tour block"
    before, marker, after = block.group(1).partition(RESTART)
    assert marker, "the tour no longer restarts the daemon"
    return before, marker + after


def _clean_env() -> dict[str, str]:
    # As a newcomer's shell: no kafkacoord settings, so every default applies.
    return {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOORD_")}


class TourDaemon:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.process: DaemonProcess | None = None

    def start(self) -> None:
        previous = Path.cwd()
        os.chdir(self.cwd)  # the default data_dir is relative: var/kafkacoord
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(_clean_env())
            # JSON logs for the harness; free ports so parallel runs cannot collide.
            self.process = DaemonProcess({"KAFKACOORD_LOG_FORMAT": "json",
                                          "KAFKACOORD_METRICS_PORT": "0",
                                          "KAFKACOORD_LISTEN": "127.0.0.1:0"})  # fmt: skip
        finally:
            os.environ.clear()
            os.environ.update(saved)
            os.chdir(previous)
        self.process.wait_for("group shards active", timeout_s=120)

    def stop(self) -> None:
        assert self.process is not None
        self.process.process.send_signal(signal.SIGINT)
        self.process.process.wait(60)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    for name in ("examples", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    yield tmp_path
    # Whatever the tour left running (on failure) goes with the test; only its own.
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if proc.name.isdigit() and (proc / "cwd").resolve() == tmp_path.resolve():
                os.kill(int(proc.name), signal.SIGKILL)


def run(script: str, cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=_clean_env(),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, f"tour failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def leaders(describe: str) -> list[int]:
    return [int(n) for n in re.findall(r"Leader: (-?\d+)", describe)]


KEYS = 20


def read_back(output: str) -> list[str]:
    """The keys a ``get`` printed with the value the tour wrote."""
    return re.findall(r"^key-(\d+) = value-\1$", output, re.M)


def test_readme_tour_runs_as_written(workdir: Path) -> None:
    before, after = tour_block()
    daemon = TourDaemon(workdir)
    daemon.start()
    try:
        first = run(before, workdir)
        daemon.stop()
        daemon.start()
        second = run(after, workdir)
    finally:
        if daemon.process is not None:
            daemon.process.stop()
    assert "Created topic kv." in first, first
    assert first.count("acknowledged by node") == KEYS, first
    found = leaders(first)
    # Describes after create, after the kill, as of before the kill, after the election.
    assert len(found) == 12, first
    killed = found[0]  # the leader of partition 0
    assert killed not in found[3:6] and -1 not in found[3:6], first
    assert found[6:9] == found[0:3], first  # --as-of: the leaders before the kill
    assert killed in found[9:], first  # the preferred election gave it leaderships back
    # explain names the killed node's expired session as the cause of the new leader.
    assert re.search(
        rf"leader {killed} → {found[3]}, epoch \d+ → \d+: node {killed}'s session expired "
        r"\(last heartbeat \d\d:\d\d:\d\d\); ISR \[[\d,]+\] → \[[\d,]+\]; chosen from the ISR",
        first,
    ), first
    # Every acknowledged key read back twice: after the failover, and from its new copy.
    got = read_back(first)
    assert sorted(got, key=int) == sorted([str(i) for i in range(1, KEYS + 1)] * 2, key=int)
    assert "missing" not in first, first
    assert first.count("kafkacoord-member") >= 2, first  # two workers in billing
    # After the daemon's restart: the topic and every service node are still there, the
    # nodes heartbeating the new daemon (unfenced) and every partition led again.
    assert len(leaders(second)) == 3 and -1 not in leaders(second), second
    for node in (1, 2, 3):
        assert re.search(rf"^{node}\s.*\bUNFENCED\b", second, re.M), second
