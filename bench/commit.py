"""Offset commits through kafkacoord against raw appends and the broker's own commits.

One broker (the embedded tansu, or Apache Kafka with --broker kafka) and one daemon
process (the real daemon: controller, node agent, group shards with leader-epoch
writers). Clients reach the daemon over its listener. Each measurement runs for
--seconds with at most --concurrency requests in flight:

- raw_rate:            acks=all appends of the same offset-commit records (the appender)
- commit_rate:         OffsetCommit client -> daemon -> durable append -> reply, at peak
- p50_ms / p99_ms:     commit latency with load paced at half of that peak
- native_commit_rate:  confluent-kafka Consumer.commit(asynchronous=False) against the
                       broker's own group coordinator, one consumer per concurrent caller
                       (classic protocol)
- native_consumer_protocol_rate: on Apache Kafka, the same with KIP-848 members
                       (group.protocol=consumer), subscribed and assigned first

Also measured, to show where the time goes (all on the same cores):

- cpu_ms_per_commit:   CPU milliseconds per commit of the daemon, of this process (the
                       client and its load) and of the broker, during the peak window
- broker_cpu_ms:       the broker's CPU per raw append, per kafkacoord commit and per
                       native commit
- broker_cpu_ratio:    the broker's CPU per kafkacoord commit / its CPU per raw append
- cpu_ratio_native:    daemon plus broker CPU per kafkacoord commit / the broker's CPU per
                       commit of its own (classic) coordinator
- daemon_us_per_commit: the daemon's CPU per commit at peak, in microseconds
- daemon_threads_us:   the same, per thread (librdkafka's own threads show as native-<tid>)
- latency_curve:       p50/p99 and CPU per commit with load paced at an eighth and a
                       quarter of the peak

With --repeat N every figure is taken N times, in turns (raw, kafkacoord, the broker's
classic coordinator, its KIP-848 one), and each is reported as the median of the N, with
every run (``runs``) and the spread (``spread``: min, max). Ratios are taken within a
round, then their median. The latency curve and the profilers run in the first round.

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.appender

from benchlib import (
    BROKERS,
    broker_for,
    cpu_seconds,
    log,
    perf_record,
    py_spy,
    start_daemon,
    thread_cpu_seconds,
    thread_names,
)
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from kafkacoord.client.connector import CoordinatorClient, error_of
from kafkacoord.codecs import encode_record
from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.server.settings import Settings
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_config import client_config_of
from kafkacoord.storage.kafka_security import ADMIN, KAFKACOORD, properties_file
from kafkacoord.storage.topics import ensure_topics
from kafkacoord.wire import ResponseFrame
from tests.appender import Appender

GROUPS = 16
PARTITIONS = 8
SHARDS = 8


class CpuMeter:
    """CPU used by named processes between start() and stop()."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def start(self) -> None:
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        self.used = {n: cpu_seconds(p) - self._start[n] for n, p in self.pids.items()}
        return self.used

    def per_op_ms(self, ops: int) -> dict[str, float]:
        return {name: round(seconds * 1000 / max(ops, 1), 3) for name, seconds in self.used.items()}


def windowed(seconds: float, concurrency: int, issue: object) -> tuple[int, float]:
    """Keep ``concurrency`` futures in flight for ``seconds``; return (completed, elapsed)."""
    inflight: deque[Future[object]] = deque()
    done = 0
    i = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        while len(inflight) < concurrency:
            inflight.append(issue(i))  # type: ignore[operator]
            i += 1
        inflight.popleft().result(30)
        done += 1
    for future in inflight:
        future.result(30)
        done += 1
    return done, time.perf_counter() - started


def commit_body(i: int) -> tuple[str, g.OffsetCommit]:
    group = f"bench-{i % GROUPS}"
    topic = g.CommitTopic(
        name="events", partitions=[g.CommitPartition(partition=i % PARTITIONS, offset=i)]
    )
    return group, g.OffsetCommit(group_id=group, topics=[topic])


def percentiles(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[max(int(len(ms) * 0.99) - 1, 0)], 2),
    }


def kafkacoord_commits(
    client: CoordinatorClient,
    seconds: float,
    concurrency: int,
    rate: float | None = None,
) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()

    def issue(i: int) -> Future[object]:
        if rate is not None:  # paced: wait for this request's slot
            slot = paced_start + i / rate
            while (delay := slot - time.perf_counter()) > 0:
                time.sleep(delay)
        group, body = commit_body(i)
        sent = time.perf_counter()
        _, future = client.send(partition_for(group, SHARDS), body)
        result: Future[object] = Future()

        def finished(f: Future[ResponseFrame]) -> None:
            reply = f.result()
            if error_of(reply).name != "NONE":
                result.set_exception(RuntimeError(f"commit failed: {reply}"))
                return
            with lock:
                latencies.append(time.perf_counter() - sent)
            result.set_result(None)

        future.add_done_callback(finished)
        return result

    paced_start = time.perf_counter()
    done, elapsed = windowed(seconds, concurrency, issue)
    return done, elapsed, latencies


def raw_appends(
    bootstrap: str, topic: str, seconds: float, concurrency: int, meter: CpuMeter
) -> tuple[int, float]:
    records = [
        encode_record(
            OffsetCommitKey(f"bench-{i % GROUPS}", "events", i % PARTITIONS),
            OffsetCommitValue(i, "", int(time.time() * 1000)),
        )
        for i in range(4096)
    ]
    with Appender(bootstrap, client_id="bench-raw") as appender:
        appender.append(topic, 0, b"warm", b"up").result(30)

        def issue(i: int) -> Future[object]:
            key, value = records[i % len(records)]
            return appender.append(topic, i % SHARDS, key, value)  # type: ignore[return-value]

        meter.start()
        done, elapsed = windowed(seconds, concurrency, issue)
        meter.stop()
    return done, elapsed


def native_commits(
    bootstrap: str, seconds: float, concurrency: int, meter: CpuMeter, protocol: str = "classic"
) -> tuple[int, float]:
    """Consumer.commit() against the broker's own coordinator. ``consumer``: KIP-848
    members (subscribed and assigned before the window), committing their partitions."""
    counts = [0] * concurrency
    failed = [0] * concurrency
    ready = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def worker(k: int) -> None:
        config = {"group.id": f"native-{protocol}-{k % GROUPS}",
                  "enable.auto.commit": False, "group.protocol": protocol}  # fmt: skip
        # Not base_config: its Python logger would carry these consumers' log storm.
        security = client_config_of(bootstrap)
        consumer = Consumer({"bootstrap.servers": str(bootstrap), **config,
                             **({} if security is None else security.librdkafka())})  # fmt: skip
        owned = [TopicPartition("events", p) for p in range(PARTITIONS)]
        if protocol == "consumer":
            consumer.subscribe(["events"])
            until = time.monotonic() + 60
            while not consumer.assignment() and time.monotonic() < until:
                consumer.poll(0.1)
            owned = [TopicPartition(tp.topic, tp.partition) for tp in consumer.assignment()]
        owned = owned or [TopicPartition("events", 0)]
        consumer.commit(offsets=[TopicPartition(owned[0].topic, owned[0].partition, 0)],
                        asynchronous=False)  # fmt: skip
        ready.wait()
        i = 0
        try:
            while time.perf_counter() < deadline[0]:
                i += 1
                tp = owned[i % len(owned)]
                try:
                    consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, i)],
                                    asynchronous=False)  # fmt: skip
                except KafkaException:
                    # The broker's coordinator moved the member on (a KIP-848 member's
                    # stale epoch): learn where it stands and go on, as an application
                    # would. Counted, not timed away.
                    failed[k] += 1
                    consumer.poll(0.05)
                    owned = [TopicPartition(t.topic, t.partition)
                             for t in consumer.assignment()] or owned  # fmt: skip
                    continue
                counts[k] += 1
                if protocol == "consumer" and i % 64 == 0:
                    consumer.poll(0)  # serve the member's callbacks now and then
        finally:
            consumer.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    ready.wait()
    started = time.perf_counter()
    deadline[0] = started + seconds
    meter.start()
    for t in threads:
        t.join(seconds + 90)
    meter.stop()
    if sum(failed):
        log(f"native ({protocol}): {sum(failed)} commits failed and were not counted")
    return sum(counts), time.perf_counter() - started


def per_thread_us(pid: int, before: dict[int, float], commits: int) -> dict[str, float]:
    """The daemon's CPU per commit in each thread that used any (named by py-spy)."""
    after, names = thread_cpu_seconds(pid), thread_names(pid)
    used: dict[str, float] = {}
    for tid, seconds in after.items():
        spent = (seconds - before.get(tid, 0.0)) * 1e6 / max(commits, 1)
        if spent >= 0.5:
            name = names.get(tid, f"native-{tid}")
            used[name] = round(used.get(name, 0.0) + spent, 1)
    return dict(sorted(used.items(), key=lambda item: -item[1]))


def measure_round(
    client: CoordinatorClient,
    meter: CpuMeter,
    args: argparse.Namespace,
    *,
    bootstrap: str,
    daemon_pid: int,
    first: bool,
) -> dict[str, object]:
    """One round of every figure, taken in turns on the same daemon and broker: raw
    appends, kafkacoord at peak and at half of it, the broker's own commits (classic,
    then KIP-848 on Apache Kafka). The latency curve and the profilers run in the first
    round only."""
    seconds, concurrency = args.seconds, args.concurrency
    raw_done, elapsed = raw_appends(bootstrap, "bench_raw", seconds, concurrency, meter)
    raw = raw_done / elapsed
    raw_broker = meter.per_op_ms(raw_done)["broker"]
    log(f"raw: {raw:.0f}/s")
    profiler = py_spy(daemon_pid, args.profile, seconds) if first and args.profile else None
    perf = perf_record(daemon_pid, args.perf, seconds) if first and args.perf else None
    threads_before = thread_cpu_seconds(daemon_pid)
    meter.start()
    done, elapsed, _ = kafkacoord_commits(client, seconds, concurrency)
    meter.stop()
    threads = per_thread_us(daemon_pid, threads_before, done)
    for sampler in (profiler, perf):
        if sampler is not None:
            sampler.wait(60)
    peak = done / elapsed
    cpu_per_commit = meter.per_op_ms(done)
    log(f"daemon threads, µs per commit: {threads}")
    log(f"kafkacoord peak: {peak:.0f}/s, CPU ms per commit {cpu_per_commit}")
    done, elapsed, latencies = kafkacoord_commits(client, seconds, concurrency, rate=peak / 2)
    half = percentiles(latencies)
    log(f"at {done / elapsed:.0f}/s: p50 {half['p50_ms']:.2f} ms, p99 {half['p99_ms']:.2f} ms")
    curve = {}
    for fraction in (0.125, 0.25) if first else ():
        meter.start()
        done, elapsed, lat = kafkacoord_commits(client, seconds, concurrency, rate=peak * fraction)
        meter.stop()
        curve[str(fraction)] = {
            "rate": round(done / elapsed),
            **percentiles(lat),
            "cpu_ms_per_commit": meter.per_op_ms(done),
        }
    if curve:
        log(f"latency curve: {curve}")
    native_done, elapsed = native_commits(bootstrap, seconds, concurrency, meter)
    if native_done == 0:
        # Seen on the embedded broker: its coordinator held every commit past the
        # window (a stall of its own). Once more, else a clear failure, not a ratio.
        log("native: no commit finished in the window; measuring again")
        native_done, elapsed = native_commits(bootstrap, seconds, concurrency, meter)
        if native_done == 0:
            raise SystemExit("the broker's own coordinator finished no commit in two windows")
    native = native_done / elapsed
    native_broker = meter.per_op_ms(native_done)["broker"]
    log(f"native: {native:.0f}/s")
    native_848 = None
    if args.broker == "kafka":  # tansu serves only the classic protocol
        done_848, elapsed = native_commits(bootstrap, seconds, concurrency, meter, "consumer")
        if done_848 == 0:
            # Seen on Kafka 4.4: a window in which no KIP-848 commit finished. Once more,
            # else a clear failure rather than a round without the figure.
            log("native, consumer protocol: no commit finished in the window; measuring again")
            done_848, elapsed = native_commits(bootstrap, seconds, concurrency, meter, "consumer")
            if done_848 == 0:
                raise SystemExit("Kafka's KIP-848 coordinator finished no commit in two windows")
        native_848 = done_848 / elapsed
        log(f"native, consumer protocol: {native_848:.0f}/s")
    return {
        "raw_rate": round(raw),
        "commit_rate": round(peak),
        "p50_ms": round(half["p50_ms"], 2),
        "p99_ms": round(half["p99_ms"], 2),
        "native_commit_rate": round(native),
        "ratio_raw": round(peak / raw, 3),
        "ratio_native": round(peak / native, 3),
        "broker_cpu_ratio": round(cpu_per_commit["broker"] / max(raw_broker, 1e-9), 2),
        "cpu_ratio_native": round(
            (cpu_per_commit["daemon"] + cpu_per_commit["broker"]) / max(native_broker, 1e-9), 2
        ),
        "daemon_us_per_commit": round(cpu_per_commit["daemon"] * 1000, 1),
        "cpu_ms_per_commit": cpu_per_commit,
        "broker_cpu_ms": {
            "raw_append": raw_broker,
            "kafkacoord_commit": cpu_per_commit["broker"],
            "native_commit": native_broker,
        },
        "latency_curve": curve,
        "daemon_threads_us": threads,
        **(
            {
                "native_consumer_protocol_rate": round(native_848),
                "ratio_native_consumer_protocol": round(peak / native_848, 3),
            }
            if native_848
            else {}
        ),
    }


# The figures taken every round: the result gives their median, every run and the spread.
REPEATED = (
    "raw_rate", "commit_rate", "p50_ms", "p99_ms", "native_commit_rate", "ratio_raw",
    "ratio_native", "broker_cpu_ratio", "cpu_ratio_native", "daemon_us_per_commit",
    "native_consumer_protocol_rate", "ratio_native_consumer_protocol",
)  # fmt: skip


def summarize(args: argparse.Namespace, rounds: list[dict[str, object]]) -> dict[str, object]:
    """The first round's detail, with each repeated figure replaced by its median over the
    rounds; ``runs`` keeps every round's value and ``spread`` their (min, max). Ratios
    are taken within a round (the same minute of the machine), then their median."""
    result: dict[str, object] = {"broker": args.broker, "concurrency": args.concurrency,
                                 "repeat": len(rounds), **rounds[0]}  # fmt: skip
    runs: dict[str, list[float]] = {}
    for name in REPEATED:
        values = [cast(float, r[name]) for r in rounds if name in r]
        if not values:
            continue
        runs[name] = values
        median = statistics.median(values)
        result[name] = round(median, 3) if isinstance(values[0], float) else round(median)
    result["runs"] = runs
    result["spread"] = {name: [min(v), max(v)] for name, v in runs.items()}
    return result


def run(
    bootstrap: str,
    broker_pid: int,
    args: argparse.Namespace,
    data_dir: Path,
    kafkacoord_config: str = "",
) -> dict[str, object]:
    admin = admin_client(bootstrap)
    for future in admin.create_topics(
        [NewTopic("events", PARTITIONS, 1), NewTopic("bench_raw", SHARDS, 1)]
    ).values():
        future.result(30)
    settings = Settings(
        bootstrap=bootstrap,
        data_dir=data_dir,
        offsets_partitions=SHARDS,
        offsets_replication_factor=1,
        log_level="warning",
    )
    ensure_topics(admin_client(bootstrap), settings.topics.specs(), replication_factor=1)
    config = client_config_of(bootstrap)
    # The daemon as kafkacoord's principal; the load and the baselines as the super user.
    extra = {} if config is None else {"KAFKACOORD_KAFKA_CONFIG": kafkacoord_config}
    daemon = start_daemon(bootstrap, data_dir, SHARDS, **extra)
    try:
        client = CoordinatorClient(bootstrap, topic_prefix=settings.topic_prefix)
        # Wait until every shard answers.
        for i in range(GROUPS):
            group, body = commit_body(i)
            client.call(partition_for(group, SHARDS), body, g.OffsetCommitResponse, timeout_s=120)
        log("daemon serving")
        meter = CpuMeter({"daemon": daemon.pid, "client": os.getpid(), "broker": broker_pid})
        rounds = [
            measure_round(
                client, meter, args, bootstrap=bootstrap, daemon_pid=daemon.pid, first=r == 0
            )
            for r in range(args.repeat)
        ]
        client.close()
    finally:
        daemon.terminate()
        daemon.wait(30)
    return summarize(args, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="take every figure this many times, in turns; report medians and spread",
    )  # fmt: skip
    parser.add_argument(
        "--secure", action="store_true",
        help="Apache Kafka with SASL_SSL (SCRAM-SHA-512) and ACLs: the daemon as kafkacoord",
    )  # fmt: skip
    parser.add_argument(
        "--profile", metavar="PATH", help="py-spy the daemon at peak; collapsed stacks to PATH"
    )
    parser.add_argument(
        "--perf", metavar="PATH", help="Linux perf record of the daemon at peak, to PATH"
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        broker_for(args.broker, Path(tmp), secure=args.secure) as broker,
    ):
        assert broker.pid is not None
        workdir = Path(tmp)
        if isinstance(broker, KafkaBroker) and args.secure:
            own = broker.data_dir / properties_file(KAFKACOORD)
            result = run(broker.bootstrap_as(ADMIN), broker.pid, args, workdir / "node", str(own))
        else:
            result = run(broker.bootstrap, broker.pid, args, workdir / "node")
    result["secure"] = args.secure
    print(json.dumps(result))


if __name__ == "__main__":
    main()
