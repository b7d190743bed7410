"""P4: the Spark view pipeline against its source alone, for both sources, on one broker.

The two sources are the kafkacoord Python data source (``python``) and Spark's
own Kafka source with spark-avro (``connector``); both feed the same fold and
must build the same views. For each, in one run (local Spark, ``--master``,
default local[2]), on the embedded tansu broker or ``--broker kafka``:

- raw_rate:  the source alone (decoded and fenced rows), into Spark's noop sink
- view_rate: the whole view job (fold, RocksDB state, warehouse writes) over
  the same ``--records`` records (every key distinct: the state grows by one
  key per record, the fold's worst case)
- freshness_p95_s: with a 1 s trigger and a steady write load, the p95 delay
  from a record's append (its delivery ack) to the warehouse commit of the
  micro-batch that holds it
- batch_s_100k / batch_s_1m: the median micro-batch time (Spark's
  triggerExecution) when 1,000 existing keys change, over a state of
  ``--small-records`` keys and then ``--records`` keys

Every burst of records ends in one-record batches, one per partition: tansu
answers ListOffsets(latest) with the last batch's base offset + 1, and Spark's
Kafka source plans its reads to that answer (the Python source reads end
offsets from fetches and needs no such care). Records in the freshness load go
one per batch for the same reason.

Each source runs on both warehouses (``--warehouses parquet,delta``): the
views' Delta Lake tables (keyed ``python_delta``, ``connector_delta``) and, as
the baseline, the hand-made Parquet warehouse they replaced
(``parquet_warehouse.py``; keyed ``python``, ``connector``), with
``tables_bytes``, the large state's tables on disk (Delta's before any vacuum).

The last stdout line is JSON, naming the broker. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from benchlib import BROKERS, broker_for, log
from confluent_kafka import Message, Producer
from parquet_warehouse import ParquetWarehouse

from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import (
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, TopicSpec, ensure_topics

PARTITIONS_PER_GROUP = 16
TIME_LIMIT_S = 900
CHANGED_KEYS = 1_000


def java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass
class Dataset:
    """Groups of 16 committed partitions, one group record each: about one key per record."""

    topics: InternalTopics
    records: int
    groups: int = 0

    def __post_init__(self) -> None:
        self.groups = max(1, self.records // (PARTITIONS_PER_GROUP + 1))

    @property
    def committed_topic(self) -> str:
        return committed_topic(self.topics)

    def group(self, g: int) -> str:
        return f"group-{g:07d}"

    def shard(self, g: int) -> int:
        return abs(java_hash(self.group(g))) % self.topics.offsets_partitions

    def commit(self, g: int, p: int, offset: int) -> tuple[int, bytes, bytes]:
        key = encode_key(OffsetCommitKey(self.group(g), self.committed_topic, p))
        value = encode_value(OffsetCommitValue(offset, "", int(time.time() * 1000), 0))
        return self.shard(g), key, value

    def initial(self) -> Iterator[tuple[int, bytes, bytes]]:
        member = GroupMember("m", "client", "/10.0.0.1", 300_000, 45_000, b"", b"")
        for g in range(self.groups):
            value = GroupMetadataValue("consumer", 1, 0, (member,), "range", "m")
            yield self.shard(g), encode_key(GroupMetadataKey(self.group(g))), encode_value(value)
            for p in range(PARTITIONS_PER_GROUP):
                yield self.commit(g, p, g)

    def changes(self, count: int, rng: random.Random) -> Iterator[tuple[int, bytes, bytes]]:
        """``count`` commits to distinct existing keys."""
        keys = rng.sample(range(self.groups * PARTITIONS_PER_GROUP), count)
        for k in keys:
            yield self.commit(
                k // PARTITIONS_PER_GROUP, k % PARTITIONS_PER_GROUP, rng.randrange(10**9)
            )


def producer(bootstrap: str, *, one_per_batch: bool = False) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0 if one_per_batch else 5,
            "batch.num.messages": 1 if one_per_batch else 10_000,
            "acks": "all",
            "enable.idempotence": True,
            "queue.buffering.max.messages": 500_000,
        }
    )


class Writer:
    """A warm producer. Each burst is batched, except each partition's last record:
    it goes alone, once the rest is acknowledged, so the log ends in one-record batches."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.out = producer(bootstrap)
        self.out.list_topics(topic, timeout=30)  # metadata now, not in the first burst

    def _send(self, partition: int, key: bytes, value: bytes, on_delivery: Any) -> None:
        deadline = time.monotonic() + TIME_LIMIT_S
        while True:
            try:
                self.out.produce(self.topic, value, key, partition, on_delivery=on_delivery)
                return
            except BufferError:
                self.out.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("producing took too long") from None

    def write(
        self,
        records: Iterator[tuple[int, bytes, bytes]],
        on_delivery: Callable[[Any, Message], None] | None = None,
    ) -> int:
        count = 0
        last: dict[int, tuple[bytes, bytes]] = {}
        for partition, key, value in records:
            held = last.get(partition)
            last[partition] = (key, value)
            if held is not None:
                self._send(partition, *held, on_delivery)
                count += 1
                if count % 10_000 == 0:
                    self.out.poll(0)
        if self.out.flush(120):
            raise RuntimeError("records left undelivered")
        for partition, (key, value) in last.items():
            self._send(partition, key, value, on_delivery)
        if self.out.flush(60):
            raise RuntimeError("records left undelivered")
        return count + len(last)


def produce(bootstrap: str, topic: str, records: Iterator[tuple[int, bytes, bytes]]) -> int:
    return Writer(bootstrap, topic).write(records)


def committed_topic(topics: InternalTopics) -> str:
    """The topic the groups commit for: it exists, so the lag sampler samples it."""
    return f"{topics.prefix}orders"


def make_topics(bootstrap: str, tag: str) -> InternalTopics:
    """The internal topics, and the topic their groups commit for (:func:`committed_topic`):
    without it the end-offset sampler finds nothing to sample, and ``lag_samples`` stays
    empty, unlike any deployment's."""
    topics = InternalTopics(prefix=f"bench{tag}{uuid.uuid4().hex[:6]}_")
    committed = TopicSpec(committed_topic(topics), PARTITIONS_PER_GROUP,
                          {"cleanup.policy": "delete"}, fixed_partitions=False)  # fmt: skip
    ensure_topics(admin_client(bootstrap), [*topics.specs(), committed], replication_factor=1)
    return topics


def write_dataset(bootstrap: str, data: Dataset) -> None:
    started = time.perf_counter()
    count = produce(bootstrap, data.topics.offsets, data.initial())
    log(f"  wrote {count:,} records in {time.perf_counter() - started:.1f}s")
    data.records = count


# Warehouse directories the baseline (the Parquet warehouse) runs in; the rest are Delta.
BASELINE_DIRS: set[Path] = set()


def warehouse_of(config: Any) -> ParquetWarehouse | None:
    """The baseline's store for its directories; None: the job's own (Delta) warehouse."""
    return ParquetWarehouse(config.warehouse) if config.warehouse in BASELINE_DIRS else None


def raw_rate(spark: Any, config: Any, data: Dataset, workdir: Path) -> float:
    checkpoint = workdir / f"raw-{config.warehouse.name}"
    query = (
        config.stream(spark)
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    started = time.perf_counter()
    running = query.start()
    running.awaitTermination(TIME_LIMIT_S)
    elapsed = time.perf_counter() - started
    rows = sum(p["numInputRows"] for p in running.recentProgress)
    assert rows == data.records, f"the source read {rows} records, {data.records} were written"
    return data.records / elapsed


@contextmanager
def view_job(spark: Any, config: Any, on_phase: Any = None) -> Iterator[Any]:
    from kafkacoord.spark.run import ViewJob

    job = ViewJob(spark, config, on_phase=on_phase, warehouse=warehouse_of(config))
    job.start()
    try:
        yield job
    finally:
        job.stop()


def build_views(spark: Any, config: Any, data: Dataset) -> float:
    """Run the view job once over everything; returns records per second."""
    from kafkacoord.spark.run import run

    started = time.perf_counter()
    job = run(spark, config, warehouse=warehouse_of(config))
    elapsed = time.perf_counter() - started
    rows = sum(p["numInputRows"] for p in job.query.recentProgress)
    assert rows == data.records, f"the view job read {rows} records, {data.records} were written"
    return data.records / elapsed


def batch_time(spark: Any, config: Any, bootstrap: str, data: Dataset, rounds: int) -> float:
    """Median triggerExecution of a batch holding exactly 1,000 changed keys."""
    rng = random.Random(7)
    times: list[float] = []
    writer = Writer(bootstrap, data.topics.offsets)
    with view_job(spark, config) as job:
        query = job.query
        wait_idle(query)
        attempts = 0
        while len(times) < rounds and attempts < rounds * 4:
            attempts += 1
            seen = last_batch(query)
            data.records += writer.write(data.changes(CHANGED_KEYS, rng))
            batches = wait_for_rows(query, seen, CHANGED_KEYS)
            if len(batches) == 1 and batches[0]["numInputRows"] == CHANGED_KEYS:
                times.append(batches[0]["durationMs"]["triggerExecution"] / 1000)
                log(f"    batch of {CHANGED_KEYS} changed keys: {times[-1]:.3f}s")
            time.sleep(1.5)
    assert len(times) >= max(1, rounds // 2), "too few unsplit batches to measure"
    return statistics.median(times)


def last_batch(query: Any) -> int:
    """The newest batch that read data (idle reports carry the next batch's id)."""
    return max((int(p["batchId"]) for p in query.recentProgress if p["numInputRows"]), default=-1)


def wait_idle(query: Any, quiet_s: float = 3.0) -> None:
    deadline = time.monotonic() + TIME_LIMIT_S
    seen, since = last_batch(query), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, "the query never went idle"
        time.sleep(0.2)
        now = last_batch(query)
        if now != seen:
            seen, since = now, time.monotonic()


def wait_for_rows(query: Any, after: int, rows: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        batches = [p for p in query.recentProgress if p["batchId"] > after and p["numInputRows"]]
        if sum(p["numInputRows"] for p in batches) >= rows:
            return batches
        assert query.isActive, query.exception()
        time.sleep(0.1)
    seen = [(p["batchId"], p["numInputRows"]) for p in query.recentProgress]
    raise TimeoutError(f"the changes never reached a batch after {after}: {seen}")


def wait_until_read(
    query: Any, topic: str, appended: list[tuple[int, int, float]], commits: dict[int, float]
) -> dict[int, dict[str, int]]:
    """Each batch's end offsets, once committed batches cover every appended record.

    Counting rows is not enough: a restarted job may read a batch again (its rows
    count twice), and a slow batch may still be running when the count is reached."""
    last: dict[str, int] = {}
    for partition, offset, _ in appended:
        name = f"{topic}|{partition}"
        last[name] = max(last.get(name, -1), offset)
    deadline = time.monotonic() + 180
    while True:
        ends = {
            p["batchId"]: end_offsets(p["sources"][0]["endOffset"])
            for p in query.recentProgress
            if p["numInputRows"]
        }
        covered = {name: max((e.get(name, 0) for b, e in ends.items() if b in commits),
                             default=0) for name in last}  # fmt: skip
        if all(covered[name] > offset for name, offset in last.items()):
            return ends
        assert query.isActive, query.exception()
        behind = sorted(n for n, o in last.items() if covered[n] <= o)
        assert time.monotonic() < deadline, f"appended records never read: {behind[:5]}"
        time.sleep(0.2)


def freshness(
    spark: Any, config: Any, bootstrap: str, data: Dataset, *, seconds: float, rate: int
) -> float:
    """p95 seconds from a record's append to the commit of the batch that holds it."""
    commits: dict[int, float] = {}
    appended: list[tuple[int, int, float]] = []
    lock = threading.Lock()

    def on_phase(phase: str, batch: int) -> None:
        if phase == "published":
            commits[batch] = time.time()

    def delivered(err: Any, msg: Message) -> None:
        if err is None:
            with lock:
                appended.append((msg.partition(), msg.offset(), time.time()))

    rng = random.Random(11)
    with view_job(spark, config, on_phase=on_phase) as job:
        wait_idle(job.query)
        out = producer(bootstrap, one_per_batch=True)
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * rate)
            for partition, key, value in data.changes(max(0, due - sent), rng):
                out.produce(data.topics.offsets, value, key, partition, on_delivery=delivered)
                sent += 1
            out.poll(0.01)
        assert out.flush(60) == 0
        data.records += sent
        ends = wait_until_read(job.query, data.topics.offsets, appended, commits)
    delays = []
    topic = data.topics.offsets
    for partition, offset, at in appended:
        batch = min(
            (b for b, end in ends.items() if end.get(f"{topic}|{partition}", 0) > offset),
            default=None,
        )
        if batch is None or batch not in commits:
            raise AssertionError(f"record {partition}@{offset} is in no committed batch")
        delays.append(max(0.0, commits[batch] - at))
    delays.sort()
    log(f"    {len(delays):,} records, delay p50 {delays[len(delays) // 2]:.2f}s")
    return delays[int(len(delays) * 0.95) - 1]


def measure(spark: Any, config: Any, *, bootstrap: str, small: Dataset, large: Dataset,
            args: argparse.Namespace, workdir: Path) -> dict[str, float]:  # fmt: skip
    """One source's figures; ``config(data, **extra)`` gives its RunConfig."""
    build_views(spark, config(small, available_now=True), small)
    log("  (d) batch time over the small state")
    batch_small = batch_time(spark, config(small, trigger="1000 milliseconds"), bootstrap, small,
                             args.rounds)  # fmt: skip
    log(f"  (c) freshness: {args.freshness_rate}/s for {args.freshness_seconds}s, 1s trigger")
    fresh = freshness(
        spark,
        config(small, trigger="1000 milliseconds"),
        bootstrap,
        small,
        seconds=args.freshness_seconds,
        rate=args.freshness_rate,
    )
    log("  (a) raw source rate")
    raw = raw_rate(spark, config(large), large, workdir)
    log(f"      {raw:,.0f} records/s")
    log("  (b) view pipeline rate")
    view = build_views(spark, config(large, available_now=True), large)
    log(f"      {view:,.0f} records/s")
    log("  (d) batch time over the large state")
    batch_large = batch_time(spark, config(large, trigger="1000 milliseconds"), bootstrap, large,
                             args.rounds)  # fmt: skip
    return {
        "raw_rate": round(raw),
        "view_rate": round(view),
        "ratio": round(view / raw, 3),
        "freshness_p95_s": round(fresh, 3),
        "batch_s_100k": round(batch_small, 3),
        "batch_s_1m": round(batch_large, 3),
    }


def end_offsets(text: str) -> dict[str, int]:
    """``{"topic|partition": offset}`` from either source's progress report.

    The Python source reports that form; Spark's Kafka source ``{"topic": {"partition": offset}}``.
    """
    data = json.loads(text)
    flat = {}
    for name, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{name}|{p}": int(o) for p, o in value.items()})
        else:
            flat[name] = int(value)
    return flat


def repeated_freshness(
    spark: Any,
    sources: list[Any],
    args: argparse.Namespace,
    *,
    workdir: Path,
    bootstrap: str,
    small: Dataset,
) -> dict[str, Any]:
    """Freshness alone, ``--repeat`` times per source and warehouse, in turns (the order
    rotating each round): the median of the p95s, every run, and their spread."""
    from kafkacoord.spark.run import RunConfig

    arms = [(source, kind) for source in sources for kind in args.warehouses.split(",")]
    runs: dict[str, list[float]] = {}
    for round_ in range(args.repeat):
        for source, kind in arms[round_ % len(arms) :] + arms[: round_ % len(arms)]:
            name = f"{source.value}_delta" if kind == "delta" else source.value
            warehouse = workdir / f"wh-{name}-{small.topics.prefix}"
            if kind != "delta":
                BASELINE_DIRS.add(warehouse)

            def config(source: Any = source, warehouse: Path = warehouse,
                       **extra: Any) -> RunConfig:  # fmt: skip
                return RunConfig(bootstrap, warehouse, prefix=small.topics.prefix,
                                 source=source, **extra)  # fmt: skip

            if name not in runs:
                build_views(spark, config(available_now=True), small)
                runs[name] = []
            log(f"round {round_ + 1}/{args.repeat}: {name} freshness")
            runs[name].append(round(freshness(
                spark, config(trigger="1000 milliseconds"), bootstrap, small,
                seconds=args.freshness_seconds, rate=args.freshness_rate,
            ), 3))  # fmt: skip
            log(f"    p95 {runs[name][-1]:.3f}s")
    return {
        name: {
            "freshness_p95_s": statistics.median(values),
            "runs": values,
            "spread": [min(values), max(values)],
        }
        for name, values in runs.items()
    }


def run_bench(bootstrap: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kafkacoord.spark.connector import connector_jars
    from kafkacoord.spark.run import RunConfig, Source
    from kafkacoord.spark.session import spark_session

    sources = [Source(s) for s in args.sources.split(",")]
    jars = connector_jars() if Source.CONNECTOR in sources else []
    spark = spark_session(args.master, state_partitions=args.state_partitions, jars=jars)
    spark.sparkContext.setLogLevel("ERROR")

    small = Dataset(make_topics(bootstrap, "s"), args.small_records)
    log(f"small state: {small.records:,} records")
    write_dataset(bootstrap, small)
    if args.only == "freshness":  # measured over the small state only
        result: dict[str, Any] = {"broker": args.broker, "small_records": small.records}
        result.update(repeated_freshness(spark, sources, args, workdir=workdir,
                                         bootstrap=bootstrap, small=small))  # fmt: skip
        spark.stop()
        return result
    large = Dataset(make_topics(bootstrap, "l"), args.records)
    log(f"large state: {large.records:,} records")
    write_dataset(bootstrap, large)

    result = {"broker": args.broker, "records": large.records, "small_records": small.records}
    for source in sources:
        for kind in args.warehouses.split(","):
            delta = kind == "delta"

            def config(data: Dataset, source: Source = source, delta: bool = delta,
                       **extra: Any) -> RunConfig:  # fmt: skip
                warehouse = workdir / f"wh-{source.value}-{delta}-{data.topics.prefix}"
                if not delta:
                    BASELINE_DIRS.add(warehouse)
                return RunConfig(bootstrap, warehouse, prefix=data.topics.prefix, source=source,
                                 **extra)  # fmt: skip

            name = f"{source.value}_delta" if delta else source.value
            log(f"source {source.value}, {kind} warehouse")
            result[name] = measure(spark, config, bootstrap=bootstrap, small=small,
                                   large=large, args=args, workdir=workdir)  # fmt: skip
            tables = config(large).warehouse / "tables"
            result[name]["tables_bytes"] = sum(
                p.stat().st_size for p in tables.rglob("*") if p.is_file()
            )
            log(f"  {json.dumps(result[name])}")
    spark.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="large state / rate run")
    parser.add_argument("--small-records", type=int, default=100_000, help="small state")
    parser.add_argument("--rounds", type=int, default=5, help="batches measured per state")
    parser.add_argument("--freshness-seconds", type=float, default=30.0)
    parser.add_argument("--freshness-rate", type=int, default=1_000, help="records per second")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--state-partitions", type=int,
                        help="default: the session's cores, as views run")  # fmt: skip
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="tansu",
        help="embedded broker to start when --bootstrap is not given",
    )
    parser.add_argument("--bootstrap", help="existing cluster; default: an embedded broker")
    parser.add_argument(
        "--sources",
        default="python,connector",
        help="comma-separated: python (kafkacoord data source), connector",
    )
    parser.add_argument(
        "--warehouses",
        default="parquet,delta",
        help="comma-separated: delta (the views' Delta tables), parquet (the old hand-made "
        "warehouse, the baseline)",
    )
    parser.add_argument("--workdir", type=Path, help="keep warehouses here (default: a temp dir)")
    parser.add_argument(
        "--only",
        choices=["freshness"],
        help="freshness alone, over the small state, --repeat times in turns",
    )
    parser.add_argument("--repeat", type=int, default=3, help="with --only: runs per source")
    args = parser.parse_args()
    # stdout is for the result: logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    with tempfile.TemporaryDirectory(prefix="kc-views-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if args.bootstrap:
            result = run_bench(args.bootstrap, args, workdir)
        else:
            with broker_for(args.broker, workdir) as broker:
                result = run_bench(broker.bootstrap, args, workdir)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
