"""The examples stop cleanly on SIGTERM: within seconds, one line, no traceback,
with the daemon alive and with the daemon gone. The replicated key-value example keeps
every write it acknowledged through a leader's ``kill -9``."""

from __future__ import annotations

import contextlib
import importlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.storage.topics import InternalTopics

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

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
        self.stopping_since = 0.0
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

    def terminate(self) -> None:
        self.stopping_since = time.monotonic()
        self.process.send_signal(signal.SIGTERM)

    def stopped(self) -> tuple[float, str]:
        """Seconds from SIGTERM to exit, and stderr."""
        try:
            self.process.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"running {STOP_WITHIN_S}s after SIGTERM: {self.lines}") from None
        seconds = time.monotonic() - self.stopping_since
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
        kv = Example("replicated_kv.py", *common, "serve", "--node-id", "12")
        service.wait_for("node 11 registered")
        kv.wait_for("node 12 registered")
        if not daemon_alive:
            daemon.kill()
        stops = ((service, "stopping: "), (kv, "stopping: "), (worker, "stopping: left group g"))
        # All at once, as a host's shutdown would: each waits out its own requests.
        for example, _ in stops:
            example.terminate()
        for example, expected in stops:
            seconds, stderr = example.stopped()
            assert example.process.returncode == 0, stderr
            assert "Traceback" not in stderr, stderr
            stops = [line for line in example.lines if line.startswith("stopping: ")]
            assert len(stops) == 1 and stops[0].startswith(expected), example.lines
            assert seconds < STOP_WITHIN_S
        for node in (service, kv):
            said = "leaderships moved away" if daemon_alive else "no controlled shutdown"
            assert any(said in line for line in node.lines), node.lines
    finally:
        daemon.stop()


@contextlib.contextmanager
def service_nodes(
    bootstrap: str, tmp_path: Path, prefix: str, script: str, ids: Sequence[int], *args: str
) -> Iterator[tuple[dict[int, Example], ControllerAdmin]]:
    """A daemon and an example node per id, each registered; all killed on the way out."""
    daemon = start_daemon(fast_daemon_env(bootstrap, prefix, 5), tmp_path, 1)
    nodes: dict[int, Example] = {}
    try:
        daemon.wait_for("node registered")
        common = ["--bootstrap", bootstrap, "--topic-prefix", prefix]
        nodes = {n: Example(script, *common, *args, "--node-id", str(n)) for n in ids}
        for n, node in nodes.items():
            node.wait_for(f"node {n} registered")
        with ControllerAdmin(bootstrap, InternalTopics(prefix)) as admin:
            yield nodes, admin
    finally:
        for node in nodes.values():
            node.process.kill()
        daemon.stop()


WRITERS, WRITES_EACH, WRITE_FOR_S = 3, 120, 45.0


@pytest.mark.parametrize("bootstrap", ["tansu"], indirect=True)  # replication is the example's
def test_replicated_kv_keeps_acknowledged_writes_through_kill_9(
    bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    kv: Any = importlib.import_module("replicated_kv")
    prefix = f"kv{uuid.uuid4().hex[:8]}_"
    with service_nodes(bootstrap, tmp_path, prefix, "replicated_kv.py", (21, 22, 23),
                       "serve") as (nodes, admin):  # fmt: skip
        admin.create_topic("kv", 3, 3)
        acked: dict[str, str] = {}
        lock = threading.Lock()

        def write(writer: int) -> None:
            client = kv.KeyValueClient(bootstrap, "kv", topic_prefix=prefix, timeout_s=20)
            deadline = time.monotonic() + WRITE_FOR_S
            try:
                # Writer 0 writes every partition; the others the one whose leader dies.
                keys = (f"w{writer}-{i}" for i in range(WRITES_EACH * 10))
                mine = [k for k in keys if writer == 0 or client.partition(k) == 0]
                for i, key in enumerate(mine[:WRITES_EACH]):
                    if time.monotonic() > deadline:
                        break
                    value = f"v{i}"
                    try:
                        client.put(key, value)
                    except TimeoutError:
                        continue  # not acknowledged: it may or may not be there
                    with lock:
                        acked[key] = value
                    time.sleep(0.05)  # spread the writes over the kill and the failover
            finally:
                client.close()

        writers = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
        for thread in writers:
            thread.start()
        wait_until(lambda: len(acked) >= 30, 60, "30 acknowledged writes")
        partition = admin.metadata().partition("kv", 0)
        assert partition is not None
        victim = partition.leader
        # Its followers stall for a second (shorter than the session): writes in that time
        # must wait for them, not be acknowledged by the leader alone.
        followers = [nodes[n].process for n in partition.replicas if n != victim]
        for follower in followers:
            follower.send_signal(signal.SIGSTOP)
        time.sleep(1)
        before = len(acked)
        nodes[victim].process.kill()  # kill -9: no controlled shutdown
        for follower in followers:
            follower.send_signal(signal.SIGCONT)
        for thread in writers:
            thread.join(WRITE_FOR_S + 30)
        assert not any(thread.is_alive() for thread in writers)
        assert len(acked) > before, "no write was acknowledged after the kill"
        new_leader = admin.metadata().partition("kv", 0).leader  # type: ignore[union-attr]
        assert new_leader not in (victim, -1)
        reader = kv.KeyValueClient(bootstrap, "kv", topic_prefix=prefix, timeout_s=30)
        try:
            lost = {k: v for k, v in acked.items() if reader.get(k) != v}
        finally:
            reader.close()
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes lost: {lost}"
        assert any(reader.partition(k) == 0 for k in acked)
        for n, node in nodes.items():
            assert n == victim or "Traceback" not in "\n".join(node.errors), node.errors


@pytest.mark.parametrize("bootstrap", ["tansu"], indirect=True)  # the agent's own behaviour
def test_a_paused_service_node_rejoins_every_isr(bootstrap: str, tmp_path: Path) -> None:
    """A node paused past its session is fenced and dropped from every ISR. Resumed, its
    reports are refused until it is unfenced, and the partitions it follows under the
    same leader bring no new leadership; the example still rejoins each ISR."""
    prefix = f"rs{uuid.uuid4().hex[:8]}_"
    with service_nodes(bootstrap, tmp_path, prefix, "replicated_service.py", (31, 32)) as (
        nodes,
        admin,
    ):

        def isrs() -> list[tuple[int, ...]]:
            image = admin.metadata()
            return [tuple(sorted(image.partition("svc", p).isr))  # type: ignore[union-attr]
                    for p in range(4)]  # fmt: skip

        admin.create_topic("svc", 4, 2)
        wait_until(lambda: isrs() == [(31, 32)] * 4, 30, "both nodes in every ISR")
        paused = nodes[32].process
        paused.send_signal(signal.SIGSTOP)
        try:  # past the 3 s node session: fenced, out of every ISR
            wait_until(lambda: all(isr == (31,) for isr in isrs()), 30, "node 32 dropped")
        finally:
            paused.send_signal(signal.SIGCONT)
        wait_until(lambda: isrs() == [(31, 32)] * 4, 30, "node 32 back in every ISR")
        # It followed every partition when paused (31 took over the ones it led), so each
        # came back through a report: after a new leadership or after leaving the ISR.
        lines = nodes[32].lines
        assert any(line.startswith("out of the ISR of svc-") for line in lines), lines
        assert all("Traceback" not in "\n".join(n.errors) for n in nodes.values())
