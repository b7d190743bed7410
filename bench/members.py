"""Many classic-protocol members heartbeating against one daemon.

One broker and one daemon process. --processes client processes each run their share
of --members GroupMember instances in groups of --group-size, every process sharing
one connection to the daemon. Once every member is stable, each heartbeats every
--heartbeat-ms for --seconds while the heartbeat round trips are timed.

- members:           members that were stable when the window started
- heartbeat_p50_ms / heartbeat_p99_ms: heartbeat round trips (client call to reply)
- daemon_cpu_cores:  the daemon's CPU seconds per second over the window
- rebalances:        rebalances seen by the members during the window (0 is right)

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import BROKERS, broker_for, cpu_seconds, log, start_daemon

from kafkacoord.client import ClassicProtocolMember
from kafkacoord.logs import configure as configure_logs
from kafkacoord.server.settings import Settings
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import ensure_topics

SHARDS = 8
TOPIC_PARTITIONS = 64
READY_TIMEOUT_S = 300


class TimedMember(ClassicProtocolMember):
    """A classic-protocol member that records how long each heartbeat took."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.samples: list[float] = []

    def _heartbeat(self) -> None:
        started = time.perf_counter()
        super()._heartbeat()
        self.samples.append(time.perf_counter() - started)


def worker(args: argparse.Namespace) -> None:
    """One client process: start members, report ready, time a window, report samples."""
    configure_logs("warning")  # stdout carries the protocol with the parent
    members: list[TimedMember] = []
    for i in range(args.count):
        group = f"bench-{args.first_group + i // args.group_size}"
        members.append(
            TimedMember(
                args.bootstrap, group, ["events"], assignors=["range"],
                session_timeout_ms=max(args.heartbeat_ms * 4, 10_000),
                heartbeat_interval_ms=args.heartbeat_ms, offsets_partitions=SHARDS,
                partition_counts=lambda topics: dict.fromkeys(topics, TOPIC_PARTITIONS),
            ).start()
        )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    for member in members:
        if not member.wait_assigned(max(deadline - time.monotonic(), 0)):
            raise SystemExit(f"member of {member.group_id} never became stable")
    print("ready", flush=True)
    sys.stdin.readline()  # the window starts
    before = {id(m): (len(m.samples), m.rebalances) for m in members}
    time.sleep(args.seconds)
    samples = [s for m in members for s in m.samples[before[id(m)][0] :]]
    rebalances = sum(m.rebalances - before[id(m)][1] for m in members)
    print(json.dumps({"samples": samples, "rebalances": rebalances}), flush=True)
    closers = [threading.Thread(target=m.close) for m in members]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)


def run(bootstrap: str, args: argparse.Namespace, data_dir: Path) -> dict[str, object]:
    settings = Settings(bootstrap=bootstrap, offsets_partitions=SHARDS)
    ensure_topics(admin_client(bootstrap), settings.topics.specs(), replication_factor=1)
    daemon = start_daemon(
        bootstrap, data_dir, SHARDS, KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS="500"
    )
    workers: list[subprocess.Popen[str]] = []
    try:
        per_process = args.members // args.processes
        groups_per_process = -(-per_process // args.group_size)  # the last may be smaller
        for k in range(args.processes):
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        "--bootstrap",
                        bootstrap,
                        "--count",
                        str(per_process),
                        "--first-group",
                        str(k * groups_per_process),
                        "--group-size",
                        str(args.group_size),
                        "--heartbeat-ms",
                        str(args.heartbeat_ms),
                        "--seconds",
                        str(args.seconds),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        started = time.monotonic()
        for w in workers:
            assert w.stdout is not None
            line = w.stdout.readline().strip()
            if line != "ready":
                raise SystemExit(f"a client process failed before it was ready: {line!r}")
        log(f"{per_process * args.processes} members stable in {time.monotonic() - started:.1f}s")
        cpu_before, wall_before = cpu_seconds(daemon.pid), time.monotonic()
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        results = []
        for w in workers:
            assert w.stdout is not None
            results.append(json.loads(w.stdout.readline()))
        cores = (cpu_seconds(daemon.pid) - cpu_before) / (time.monotonic() - wall_before)
        for w in workers:
            w.wait(60)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        daemon.terminate()
        daemon.wait(30)
    ms = sorted(s * 1000 for r in results for s in r["samples"])
    return {
        "broker": args.broker,
        "members": per_process * args.processes,
        "groups": groups_per_process * args.processes,
        "processes": args.processes,
        "heartbeats": len(ms),
        "heartbeat_p50_ms": round(statistics.median(ms), 2),
        "heartbeat_p99_ms": round(ms[max(int(len(ms) * 0.99) - 1, 0)], 2),
        "daemon_cpu_cores": round(cores, 3),
        "rebalances": sum(r["rebalances"] for r in results),
        "seconds": args.seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=20)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--heartbeat-ms", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--first-group", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    with tempfile.TemporaryDirectory() as tmp, broker_for(args.broker, Path(tmp)) as broker:
        result = run(broker.bootstrap, args, Path(tmp) / "node")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
