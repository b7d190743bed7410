"""A campaign's client processes: each runs in a test host and records a history.

``python -m tests.nemesis.worker ROLE ...`` with ROLE one of:

- ``offsets``: threads that each own one group and commit strictly increasing offsets to
  its partitions (one writer per key, so every value is unique), and fetch keys of every
  writer, logging each call with its outcome;
- ``agent``: a node agent that logs each become-leader and become-follower with the
  leader epoch it was delivered;
- ``members``: classic and consumer-protocol members of two groups, logging each
  assignment with its generation or member epoch;
- ``controller``: topic creates and deletes, reassignments and preferred elections;
- ``probe``: the campaign's own client; reads commands on stdin (``serve``: wait until
  the controller and every group shard answer; ``replicated``: wait until every group
  shard's ISR is whole; ``final``: read every key) and answers a JSON line each on stdout.

SIGTERM ends a worker after the calls in flight finish.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkacoord.client import GroupMember, group_member
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.base import GroupChannel
from kafkacoord.client.errors import RequestError
from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.logs import configure as configure_logging
from kafkacoord.storage.topics import InternalTopics

from .history import HistoryWriter, Observation, Op, Outcome, now_ns

TOPIC = "orders"
CALL_TIMEOUT_S = 6.0


def outcome_of(exc: BaseException) -> Outcome:
    """``fail`` only for a refusal that no attempt of the call can have been applied past."""
    if (
        isinstance(exc, RequestError)
        and not exc.code.retriable
        and (exc.code is not ErrorCode.REQUEST_TIMED_OUT)
    ):
        return "fail"
    return "unknown"


def offset_keys(writers: list[str], threads: int, partitions: int) -> list[tuple[str, int]]:
    """Every (group, partition) the offsets writers own."""
    return [(f"g-{w}-{t}", p) for w in writers for t in range(threads) for p in range(partitions)]


class Recorder:
    def __init__(self, name: str, out: Path) -> None:
        self.name = name
        self._writer = HistoryWriter(out)
        self._lock = threading.Lock()

    def call(self, f: str, key: str, value: Any, fn: Callable[[], Any]) -> Any:
        t0 = now_ns()
        try:
            result = fn()
        except Exception as exc:  # every failure is history, never a crash
            self.write(Op(self.name, f, key, value, outcome_of(exc), t0, now_ns(), str(exc)[:200]))
            return None
        read = result if f in ("fetch",) else value
        self.write(Op(self.name, f, key, read, "ok", t0, now_ns()))
        return result

    def write(self, entry: Op | Observation) -> None:
        with self._lock:
            self._writer.write(entry)

    def close(self) -> None:
        self._writer.close()


def fetch_offset(channel: GroupChannel, group: str, partition: int) -> int | None:
    body = g.OffsetFetch(group_id=group, topics=[g.FetchTopic(name=TOPIC, partitions=[partition])])
    reply = channel.call(channel.shard_of(group), body, g.OffsetFetchResponse)
    for topic in reply.topics:
        for p in topic.partitions:
            if p.error is not ErrorCode.NONE:
                raise RequestError("OffsetFetch", p.error)
            return p.offset if p.offset >= 0 else None
    return None


def commit_offset(channel: GroupChannel, group: str, partition: int, value: int) -> None:
    body = g.OffsetCommit(
        group_id=group,
        topics=[g.CommitTopic(name=TOPIC, partitions=[g.CommitPartition(partition=partition,
                                                                          offset=value)])],
    )  # fmt: skip
    reply = channel.call(channel.shard_of(group), body, g.OffsetCommitResponse)
    for topic in reply.topics:
        for p in topic.partitions:
            if p.error is not ErrorCode.NONE:
                raise RequestError("OffsetCommit", p.error)


def run_offsets(args: argparse.Namespace, stop: threading.Event) -> None:
    recorder = Recorder(args.name, args.out)
    channel = GroupChannel(args.bootstrap, topic_prefix=args.prefix,
                           offsets_partitions=args.shards, timeout_s=CALL_TIMEOUT_S)  # fmt: skip
    keys = offset_keys(args.writers.split(","), args.threads, args.partitions)

    def writer(index: int) -> None:
        rng = random.Random(f"{args.seed}-{args.name}-{index}")
        group = f"g-{args.name}-{index}"
        # Values start from the wall clock so a restarted worker still writes higher ones.
        next_value = dict.fromkeys(range(args.partitions), time.time_ns() // 1000)
        while not stop.is_set():
            p = rng.randrange(args.partitions)
            next_value[p] += 1
            value = next_value[p]
            if not args.read_only:
                recorder.call("commit", f"{group}/{p}", value,
                              partial(commit_offset, channel, group, p, value))  # fmt: skip
            rgroup, rp = rng.choice(keys)
            recorder.call("fetch", f"{rgroup}/{rp}", None,
                          partial(fetch_offset, channel, rgroup, rp))  # fmt: skip
            stop.wait(args.pause_s)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    channel.close()
    recorder.close()


class RoleLog:
    """Replica callbacks that log each role with its leader epoch."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.agent: NodeAgent | None = None

    def _log(self, role: str, topic: str, partition: int, leader_epoch: int) -> None:
        self.recorder.write(Observation("role", self.recorder.name, now_ns(),
                                        key=f"{topic}/{partition}", role=role,
                                        leader_epoch=leader_epoch))  # fmt: skip

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
        self._log("leader", topic, partition, state.leader_epoch)

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
        self._log("follower", topic, partition, state.leader_epoch)
        agent = self.agent
        if agent is not None and agent.node_id not in state.isr and state.leader >= 0:
            threading.Thread(target=self._caught_up, args=(agent, topic, partition),
                             daemon=True).start()  # fmt: skip

    @staticmethod
    def _caught_up(agent: NodeAgent, topic: str, partition: int) -> None:
        # A follower here holds no data, so it is caught up at once; a failed report is
        # retried by the next leadership change.
        try:
            agent.report_caught_up(topic, partition)
        except Exception:  # retried by the next change
            return

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
        self._log("stopped", topic, partition, -1)


def run_agent(args: argparse.Namespace, stop: threading.Event) -> None:
    recorder = Recorder(args.name, args.out)
    roles = RoleLog(recorder)
    agent = NodeAgent(args.bootstrap, node_id=args.node_id, handler=roles,
                      topic_prefix=args.prefix, heartbeat_interval_ms=500,
                      request_timeout_s=CALL_TIMEOUT_S)  # fmt: skip
    roles.agent = agent
    while not stop.is_set():
        try:
            agent.start(timeout_s=CALL_TIMEOUT_S)
            break
        except Exception:  # no controller yet: try again
            stop.wait(1.0)
    seen = -1
    while not stop.wait(0.1):
        # The controller epoch this node heeds: it must never go back.
        if agent.controller_epoch != seen:
            seen = agent.controller_epoch
            recorder.write(Observation("epoch", args.name, now_ns(), key="controller",
                                       epoch=seen))  # fmt: skip
    agent.close()
    recorder.close()


WORK_TOPIC = "work"
WORK_PARTITIONS = 8


def watched(member: GroupMember, recorder: Recorder, name: str) -> GroupMember:
    """Logs the member's assignment whenever it or its generation (member epoch) changes.

    Wraps the member's own step (a join and sync, or a heartbeat) on the member's
    thread, the only writer of both fields, so a logged pair is never torn.
    """
    step_name = "_heartbeat" if member.protocol == "consumer" else "_join_and_sync"
    step = getattr(member, step_name)
    last: list[tuple[int, frozenset[tuple[str, int]]]] = []
    consumer = member.protocol == "consumer"
    incarnation = [0]

    def logged_step() -> None:
        step()
        seen = (member.generation, member.assignment)
        # A fenced member starts over (epoch 0, or generation -1, as Kafka's clients do):
        # it is a new observer from then on, whose epochs need not exceed the old ones.
        if member.generation <= (0 if consumer else -1):
            if last:
                incarnation[0] += 1
                last.clear()
            return
        if last and last[-1] == seen:
            return
        last[:] = [seen]
        recorder.write(Observation(
            "assignment", f"{name}#{incarnation[0]}", now_ns(), key=member.group_id,
            generation=-1 if consumer else member.generation,
            epoch=member.generation if consumer else -1,
            partitions=sorted(f"{t}/{p}" for t, p in member.assignment),
        ))  # fmt: skip

    setattr(member, step_name, logged_step)
    return member


def run_members(args: argparse.Namespace, stop: threading.Event) -> None:
    recorder = Recorder(args.name, args.out)
    counts = {WORK_TOPIC: WORK_PARTITIONS}
    # The consumer protocol's coordinator assigns what the broker says the topic has.
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for future in admin.create_topics([NewTopic(WORK_TOPIC, WORK_PARTITIONS, 1)]).values():
        with contextlib.suppress(KafkaException):  # made by an earlier run of this worker
            future.result(30)
    # The classic members' own session and partition counts (a consumer-protocol group's
    # session is the group's, and its coordinator assigns).
    classic = {
        "session_timeout_ms": 6000,
        "partition_counts": lambda topics: {t: counts[t] for t in topics if t in counts},
    }
    members: list[GroupMember] = []
    for protocol in ("classic", "consumer"):
        for index in range(args.threads):
            member = group_member(
                args.bootstrap, f"{protocol}-group", [WORK_TOPIC], protocol=protocol,
                topic_prefix=args.prefix, offsets_partitions=args.shards,
                heartbeat_interval_ms=500, rebalance_timeout_ms=10_000,
                client_id=f"{args.name}-{protocol}-{index}",
                **(classic if protocol == "classic" else {}),
            )  # fmt: skip
            members.append(watched(member, recorder, f"{args.name}-{protocol}-{index}").start())
    stop.wait()
    for member in members:
        member.close(timeout_s=5.0)
    recorder.close()


def run_controller(args: argparse.Namespace, stop: threading.Event) -> None:
    recorder = Recorder(args.name, args.out)
    admin = ControllerAdmin(args.bootstrap, InternalTopics(args.prefix), timeout_s=CALL_TIMEOUT_S)
    nodes = [int(n) for n in args.nodes.split(",")]
    rng = random.Random(f"{args.seed}-{args.name}")
    live: list[str] = []
    serial = 0
    while not stop.is_set():
        action = rng.choice(["create", "create", "elect", "reassign", "delete"])
        if action == "create" or not live:
            serial += 1
            name = f"svc-{args.name}-{serial}"
            create = partial(admin.create_topic, name, 3, min(3, len(nodes)))
            if recorder.call("create_topic", name, 3, create) is not None:
                live.append(name)
        elif action == "elect":
            topic = rng.choice(live)
            elect = partial(admin.elect_leaders, "preferred", [(topic, p) for p in range(3)])
            recorder.call("elect", topic, None, elect)
        elif action == "reassign":
            topic = rng.choice(live)
            replicas = rng.sample(nodes, min(3, len(nodes)))
            reassign = partial(admin.alter_reassignments, {(topic, 0): replicas})
            recorder.call("reassign", f"{topic}/0", replicas, reassign)
        elif len(live) > 2:
            topic = live.pop(0)
            recorder.call("delete_topic", topic, None, partial(admin.delete_topic, topic))
        stop.wait(args.pause_s)
    admin.close()
    recorder.close()


def run_probe(args: argparse.Namespace, stop: threading.Event) -> None:
    recorder = Recorder(args.name, args.out)
    channel = GroupChannel(args.bootstrap, topic_prefix=args.prefix,
                           offsets_partitions=args.shards, timeout_s=CALL_TIMEOUT_S)  # fmt: skip
    admin = ControllerAdmin(args.bootstrap, InternalTopics(args.prefix), timeout_s=CALL_TIMEOUT_S)
    probes = _group_per_shard(channel)
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "serve":
            answer = _serve(channel, admin, probes, command["within_s"])
        elif command["do"] == "replicated":
            answer = _replicated(admin, command["within_s"])
        elif command["do"] == "final":
            answer = _final(channel, recorder, command)
        else:
            answer = {"error": f"unknown command {command['do']!r}"}
        print(json.dumps(answer), flush=True)
        if stop.is_set():
            break
    channel.close()
    admin.close()
    recorder.close()


def _group_per_shard(channel: GroupChannel) -> dict[int, str]:
    probes: dict[int, str] = {}
    i = 0
    while len(probes) < channel.partitions:
        probes.setdefault(channel.shard_of(f"probe-{i}"), f"probe-{i}")
        i += 1
    return probes


def _serve(
    channel: GroupChannel, admin: ControllerAdmin, probes: dict[int, str], within_s: float
) -> dict[str, Any]:
    """Seconds until the controller and every shard answer a read; what did not, if any."""
    started = time.monotonic()
    waiting: set[str] = {"controller", *(f"shard {s}" for s in probes)}
    while waiting and time.monotonic() - started < within_s:
        for target in sorted(waiting):
            try:
                if target == "controller":
                    admin.elect_leaders("preferred", [])
                else:
                    fetch_offset(channel, probes[int(target.split()[1])], 0)
            except Exception:  # not serving yet
                continue
            waiting.discard(target)
        if waiting:
            time.sleep(0.1)
    return {"seconds": round(time.monotonic() - started, 3), "waiting": sorted(waiting)}


def _replicated(admin: ControllerAdmin, within_s: float) -> dict[str, Any]:
    """Seconds until every group shard's ISR holds all its replicas again; the shards
    still short, if any. Only then may another replica fail without taking the shard
    offline: with its ISR down to the failed node, no leader is eligible (Kafka's rule)."""
    started = time.monotonic()
    short: list[str] = []
    while time.monotonic() - started < within_s:
        with contextlib.suppress(Exception):  # the metadata not readable yet
            partitions = admin.metadata().partitions_of(admin.topics.offsets)
            short = [
                f"shard {p.partition}: isr {sorted(p.isr)} of {sorted(p.replicas)}"
                for p in partitions
                if set(p.isr) != set(p.replicas)
            ]
            if partitions and not short:
                break
        time.sleep(0.2)
    return {"seconds": round(time.monotonic() - started, 3), "waiting": short}


def _final(channel: GroupChannel, recorder: Recorder, command: dict[str, Any]) -> dict[str, Any]:
    keys = offset_keys(command["writers"], command["threads"], command["partitions"])
    unread = []
    for group, p in keys:
        for _ in range(5):
            try:
                value = fetch_offset(channel, group, p)
            except Exception:  # retried, then reported
                continue
            recorder.write(Observation("final", recorder.name, now_ns(), key=f"{group}/{p}",
                                       value=value))  # fmt: skip
            break
        else:
            unread.append(f"{group}/{p}")
    return {"read": len(keys) - len(unread), "unread": unread}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis.worker")
    parser.add_argument("role", choices=["offsets", "agent", "controller", "members", "probe"])
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--writers", default="")
    parser.add_argument("--node-id", type=int, default=0)
    parser.add_argument("--nodes", default="")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--pause-s", type=float, default=0.02)
    parser.add_argument("--read-only", action="store_true", help="offsets: fetch only")
    args = parser.parse_args(argv)
    # The clients' log lines go to stderr: the probe answers the campaign on stdout.
    configure_logging()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    runs = {"offsets": run_offsets, "agent": run_agent, "controller": run_controller,
            "members": run_members, "probe": run_probe}  # fmt: skip
    runs[args.role](args, stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
