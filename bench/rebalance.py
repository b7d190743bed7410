"""Rebalances as the members see them: a rolling restart under three protocols, and 100
members joining an empty group.

One broker, one daemon process, one topic of --partitions partitions. Each member
records when its callbacks give it a partition and take it away; a partition that no
member holds between those calls is a partition nobody processes.

- Rolling restart: --members members of one group settle, then one by one each is
  closed (it leaves) and a new one started in its place; the next restart waits until
  the group has settled again. Protocols: classic eager (``range``), classic
  cooperative (``cooperative-sticky``) and the consumer protocol (KIP-848, ``uniform``,
  with the daemon's hints). ``*_unavailable_partition_s`` is the integral, over the
  whole restart, of the number of partitions nobody held.
- ``join100_s``: --join members of the consumer protocol start together on an empty
  group; the time until every partition is held once and every member is at the
  group's target epoch.

Default heartbeat settings throughout (classic: 3 s heartbeats, 10 s sessions;
consumer protocol: the daemon's 5 s interval). The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import BROKERS, broker_for, log, start_daemon
from confluent_kafka.admin import NewTopic

from kafkacoord.client import ClassicProtocolMember, ConsumerProtocolMember, GroupAdmin, GroupMember
from kafkacoord.logs import configure as configure_logs
from kafkacoord.server.settings import Settings
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import ensure_topics

SHARDS = 8
TOPIC = "events"
SETTLE_TIMEOUT_S = 120.0
PROTOCOLS = ("eager", "cooperative", "consumer")

TP = tuple[str, int]


class Holdings:
    """Who holds which partition, from the members' callbacks, and the partition-seconds
    during which partitions were held by nobody."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._owners: dict[TP, set[str]] = {}
        self._lock = threading.Lock()
        self._since = time.monotonic()
        self._measuring = False
        self.unavailable_s = 0.0
        self.double_owned = 0

    def _account(self) -> None:
        now = time.monotonic()
        if self._measuring:
            free = self.partitions - sum(1 for o in self._owners.values() if o)
            self.unavailable_s += free * (now - self._since)
        self._since = now

    def measure(self, on: bool) -> None:
        with self._lock:
            self._account()
            self._measuring = on

    def callbacks(self, name: str) -> dict[str, Callable[[frozenset[TP]], None]]:
        def assigned(partitions: frozenset[TP]) -> None:
            with self._lock:
                self._account()
                for tp in partitions:
                    owners = self._owners.setdefault(tp, set())
                    if owners - {name}:
                        self.double_owned += 1
                    owners.add(name)

        def revoked(partitions: frozenset[TP]) -> None:
            with self._lock:
                self._account()
                for tp in partitions:
                    self._owners.get(tp, set()).discard(name)

        return {"on_assigned": assigned, "on_revoked": revoked, "on_lost": revoked}

    def all_held_once(self) -> bool:
        with self._lock:
            held = [o for o in self._owners.values() if o]
            return len(held) == self.partitions and all(len(o) == 1 for o in held)


def _member(bootstrap: str, group: str, protocol: str, holdings: Holdings, name: str,
            **extra: Any) -> GroupMember:  # fmt: skip
    common: dict[str, Any] = {"offsets_partitions": SHARDS, **holdings.callbacks(name), **extra}
    if protocol == "consumer":
        return ConsumerProtocolMember(bootstrap, group, [TOPIC], **common)
    assignor = "range" if protocol == "eager" else "cooperative-sticky"
    return ClassicProtocolMember(
        bootstrap, group, [TOPIC], assignors=[assignor], heartbeat_interval_ms=3_000,
        session_timeout_ms=10_000, **common,
    )  # fmt: skip


def _settled(members: list[GroupMember], holdings: Holdings) -> bool:
    return (
        all(m.wait_assigned(0) for m in members)
        and len({m.generation for m in members}) == 1
        and holdings.all_held_once()
        and sum(len(m.assignment) for m in members) == holdings.partitions
    )


def _wait(check: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > SETTLE_TIMEOUT_S:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def rolling_restart(bootstrap: str, protocol: str, args: argparse.Namespace) -> dict[str, Any]:
    group = f"restart-{protocol}"
    holdings = Holdings(args.partitions)
    members = [_member(bootstrap, group, protocol, holdings, f"m{i}").start()
               for i in range(args.members)]  # fmt: skip
    _wait(lambda: _settled(members, holdings), f"{protocol}: the first members to settle")
    holdings.measure(True)
    started = time.monotonic()
    settle_times = []
    for i in range(args.members):
        members[i].close()
        members[i] = _member(bootstrap, group, protocol, holdings, f"r{i}").start()
        settle_times.append(_wait(lambda: _settled(members, holdings), f"{protocol} restart {i}"))
    holdings.measure(False)
    elapsed = time.monotonic() - started
    for m in members:
        m.close()
    log(f"{protocol}: {holdings.unavailable_s:.1f} partition-s unavailable over {elapsed:.1f}s")
    return {
        "unavailable_partition_s": round(holdings.unavailable_s, 2),
        "restart_s": round(elapsed, 2),
        "max_settle_s": round(max(settle_times), 2),
        "double_owned": holdings.double_owned,
    }


def join_many(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    group = "join-many"
    holdings = Holdings(args.partitions)
    started = time.monotonic()
    members = [_member(bootstrap, group, "consumer", holdings, f"j{i}") for i in range(args.join)]
    for m in members:
        m.start()

    def at_target() -> bool:
        if not _settled(members, holdings):
            return False
        with GroupAdmin(bootstrap, offsets_partitions=SHARDS) as admin:
            [described] = admin.describe_consumer_groups([group])
        return described.state == "Stable" and described.group_epoch == members[0].generation

    _wait(at_target, f"{args.join} members to settle")
    took = time.monotonic() - started
    closers = [threading.Thread(target=m.close) for m in members]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)
    log(f"{args.join} members joined and settled in {took:.2f}s")
    return {"join_s": round(took, 2), "double_owned": holdings.double_owned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--join", type=int, default=100)
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    args = parser.parse_args()
    configure_logs("warning")
    with tempfile.TemporaryDirectory() as tmp, broker_for(args.broker, Path(tmp)) as broker:
        bootstrap = broker.bootstrap
        settings = Settings(bootstrap=bootstrap, offsets_partitions=SHARDS)
        admin = admin_client(bootstrap)
        ensure_topics(admin, settings.topics.specs(), replication_factor=1)

        for future in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            future.result(60)
        daemon = start_daemon(bootstrap, Path(tmp) / "node", SHARDS,
                              KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS="3000")  # fmt: skip
        try:
            restarts = {p: rolling_restart(bootstrap, p, args) for p in PROTOCOLS}
            joined = join_many(bootstrap, args)
        finally:
            daemon.terminate()
            daemon.wait(30)
    consumer = restarts["consumer"]["unavailable_partition_s"]
    eager = restarts["eager"]["unavailable_partition_s"]
    cooperative = restarts["cooperative"]["unavailable_partition_s"]
    result: dict[str, Any] = {
        "broker": args.broker,
        "partitions": args.partitions,
        "members": args.members,
    }
    for protocol, figures in restarts.items():
        result[f"{protocol}_unavailable_partition_s"] = figures["unavailable_partition_s"]
    result["unavailable_ratio_vs_eager"] = round(consumer / max(eager, 1e-9), 4)
    result["unavailable_ratio_vs_cooperative"] = round(consumer / max(cooperative, 1e-9), 4)
    result["join100_s"] = joined["join_s"]
    result["join_members"] = args.join
    result["restarts"] = restarts
    result["double_owned"] = (
        sum(r["double_owned"] for r in restarts.values()) + joined["double_owned"]
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
