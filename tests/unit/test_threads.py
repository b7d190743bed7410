"""The thread supervisor: names, ownership across threads, failures logged, ordered stop;
and no other module of the server, coordinator or storage starts a thread."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from structlog.testing import capture_logs

from kafkacoord.threads import PROCESS, Supervisor, current, later, spawn, supervising

PACKAGE = Path(__file__).resolve().parents[2] / "kafkacoord"


def test_threads_started_by_a_supervised_thread_belong_to_its_supervisor() -> None:
    daemon = Supervisor("daemon-1")
    seen: list[Supervisor] = []
    done = threading.Event()

    def grandchild() -> None:
        seen.append(current())
        done.set()

    def child() -> None:
        seen.append(current())
        spawn("grandchild", grandchild)

    with supervising(daemon):
        spawn("child", child)
    assert done.wait(5)
    assert seen == [daemon, daemon]
    assert current() is PROCESS  # outside the block, the process owns new threads
    assert daemon.stop(1.0) == []


def test_a_thread_that_dies_is_logged_by_name() -> None:
    supervisor = Supervisor("s")

    def broken() -> None:
        raise RuntimeError("boom")

    with capture_logs() as logs:
        supervisor.thread("broken-worker", broken).join(5)
    died = [entry for entry in logs if entry["event"] == "thread died"]
    assert [entry["thread"] for entry in died] == ["broken-worker"]


def test_stop_cancels_pending_timers_and_names_threads_still_alive() -> None:
    supervisor = Supervisor("s")
    fired = threading.Event()
    release = threading.Event()
    with supervising(supervisor):
        later(0.5, fired.set, name="restart-later")
        spawn("stuck", release.wait, 10)
        spawn("quick", lambda: None)
    assert sorted(supervisor.alive()) in (
        ["restart-later", "stuck"],
        ["quick", "restart-later", "stuck"],
    )
    assert supervisor.stop(0.2) == ["stuck"]
    assert not fired.wait(0.8)  # cancelled
    with supervising(supervisor):
        assert not later(0.01, fired.set, name="after-stop").is_alive()
    release.set()
    assert supervisor.stop(5) == []


def _thread_starts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"Thread", "Timer", "start_new_thread", "ThreadPoolExecutor"}:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}")
    return found


def test_only_the_supervisor_starts_threads_in_the_server_coordinator_and_storage() -> None:
    starts = [
        start
        for package in ("server", "coordinator", "storage")
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for start in _thread_starts(path)
    ]
    assert starts == []
    assert _thread_starts(PACKAGE / "threads.py")  # the check does see a thread start
