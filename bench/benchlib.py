"""What the benchmark scripts share: progress lines, process CPU, the broker under test."""

from __future__ import annotations

import os
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


def broker_for(kind: str, workdir: Path) -> EmbeddedBroker | KafkaBroker:
    """The broker a run measures on: tansu in memory, or Apache Kafka in ``workdir``."""
    if kind == "kafka":
        return KafkaBroker(workdir / "kafka", log_path=workdir / "kafka.log")
    return EmbeddedBroker(log_path=workdir / "tansu.log")
