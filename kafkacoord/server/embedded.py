"""What a daemon remembers of its embedded broker in ``data_dir``: kind, port and pid.

The port is reused on the next start, so service nodes and clients that know the
old bootstrap reconnect by themselves. The pid finds a broker that outlived its
daemon (a platform without a parent-death signal, or an older release): such a
broker is stopped before a new one starts, so two never hold the same state.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

from kafkacoord.storage.broker import port_is_free

log = structlog.get_logger(__name__)

STATE_FILE = "embedded-broker.json"
# What a broker's command line contains, per kind: a pid reused by another program
# is never signalled.
_COMMAND_MARKS = {"tansu": "tansu", "kafka": "kafka.Kafka"}


@dataclass(frozen=True)
class BrokerRecord:
    kind: str
    port: int
    pid: int


def remembered(data_dir: Path) -> BrokerRecord | None:
    try:
        raw = json.loads((data_dir / STATE_FILE).read_text())
        return BrokerRecord(str(raw["kind"]), int(raw["port"]), int(raw["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(data_dir: Path, record: BrokerRecord) -> None:
    path = data_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record)))
    tmp.replace(path)


def choose_port(configured: int | None, previous: BrokerRecord | None, kind: str) -> int | None:
    """The configured port, else the remembered one while it is free, else None (any)."""
    if configured:
        return configured
    if previous is not None and previous.kind == kind and port_is_free(previous.port):
        return previous.port
    if previous is not None and previous.kind == kind:
        log.warning("embedded broker's previous port is taken; clients must be given the "
                    "new bootstrap", port=previous.port)  # fmt: skip
    return None


def stop_stale(previous: BrokerRecord | None, timeout_s: float = 10.0) -> bool:
    """Stop the broker ``previous`` names if it still runs; True if one was stopped."""
    if previous is None or not _is_broker(previous):
        return False
    log.warning("stopping a stale embedded broker", pid=previous.pid, port=previous.port,
                kind=previous.kind)  # fmt: skip
    _signal(previous.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(previous.pid):
        time.sleep(0.05)
    if _alive(previous.pid):
        _signal(previous.pid, signal.SIGKILL)
        while _alive(previous.pid) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
    return True


def _is_broker(record: BrokerRecord) -> bool:
    mark = _COMMAND_MARKS.get(record.kind)
    try:
        command = Path(f"/proc/{record.pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return mark is not None and mark.encode() in command and _alive(record.pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
