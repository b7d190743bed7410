"""What the benchmark scripts share: progress lines, process CPU, the broker under test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from kafkacoord.storage.broker import EmbeddedBroker
from kafkacoord.storage.kafka_broker import KafkaBroker

BROKERS = ("tansu", "kafka")
_TICKS = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    """Progress goes to stderr: stdout ends with the result's JSON line."""
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """User plus system CPU of each of a process's threads so far, by native thread id."""
    used: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        used[int(task.name)] = (int(fields[11]) + int(fields[12])) / _TICKS
    return used


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by native thread id, from ``py-spy dump`` (empty without it)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        command = [exe, "dump", "--pid", str(pid), "--nonblocking"]
        out = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)
        text = out.stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names: dict[int, str] = {}
    for match in re.finditer(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): "([^"]*)"', text, re.M):
        ident = match.group(1)
        names[int(ident, 16) if ident.startswith("0x") else int(ident)] = match.group(2)
    return names


def py_spy(pid: int, path: str, seconds: float | None = None) -> subprocess.Popen[bytes]:
    """py-spy samples ``pid`` (collapsed stacks, per thread) for ``seconds``, or until
    :func:`stop_py_spy`."""
    duration = [] if seconds is None else ["--duration", str(int(seconds))]
    # The venv's py-spy when the venv is not on PATH.
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), *duration, "--rate", "250",
         "--format", "raw", "--threads", "--nonblocking", "--output", path],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def perf_record(pid: int, path: str, seconds: float) -> subprocess.Popen[bytes]:
    """Linux perf samples ``pid`` (every thread, kernel included) for ``seconds``: where
    py-spy sees only "in the event loop", perf tells syscalls from the interpreter. DWARF
    call graphs, since libpython keeps no frame pointers to walk."""
    return subprocess.Popen(
        ["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", path,
         "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop_py_spy(profiler: subprocess.Popen[bytes]) -> None:
    """Ends an open-ended sample; py-spy writes its output on SIGINT."""
    profiler.send_signal(signal.SIGINT)
    profiler.wait(60)


def broker_for(kind: str, workdir: Path, *, secure: bool = False) -> EmbeddedBroker | KafkaBroker:
    """The broker a run measures on: tansu in memory, or Apache Kafka in ``workdir``
    (``secure``: SASL_SSL with SCRAM and ACLs, Kafka only)."""
    if kind == "kafka":
        return KafkaBroker(workdir / "kafka", log_path=workdir / "kafka.log", secure=secure)
    if secure:
        raise SystemExit("--secure needs --broker kafka")
    return EmbeddedBroker(log_path=workdir / "tansu.log")


def start_daemon(
    bootstrap: str, data_dir: Path, shards: int, **extra: str
) -> subprocess.Popen[bytes]:
    """The real daemon as a process of its own (no GIL shared with the load), quiet, on
    free ports, with its internal topics already created by the caller."""
    env = {
        **os.environ,
        "KAFKACOORD_BOOTSTRAP": str(bootstrap),
        "KAFKACOORD_DATA_DIR": str(data_dir),
        "KAFKACOORD_OFFSETS_PARTITIONS": str(shards),
        "KAFKACOORD_LOG_LEVEL": "warning",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_METRICS_PORT": "-1",
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "kafkacoord", "daemon"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
