"""What each layer of the listener's thread costs per commit, in one process.

The daemon's listener thread does a commit's whole CPU-bound path: cut and decode the
frame, dispatch it, handle it in its group shard, encode its record, hand the batch
to the writer, fold what is durable into RocksDB and encode the reply. This runs that
path with the real classes (RequestDispatcher, ShardHost, GroupShard, the processor's
turns and TurnReplies, a RocksDB StateCache) on --commits pre-encoded OffsetCommit
frames, --per-turn of them per turn, spread over the groups and shards of
bench/commit.py. Only the sockets and the broker are left out: a stand-in writer
acknowledges each turn's batches once the next turn has run, as a pipelined producer
would, and replies are counted instead of written.

- us_per_commit:   the listener-side CPU per commit (process time)
- layers_us:       wall time per commit of each layer (frames_and_dispatch, turn,
                   replies, acknowledgements), measured around each one
- turn_split_us:   the turn split further: handle, submit (encode within it), release
                   (store within it: the fold into the turn's cache batch), cache_write
                   (the turn's one RocksDB write) and timers; timing each call adds
                   about 0.3 µs to each of them; null for the compiled build, whose
                   methods cannot be wrapped (KAFKACOORD_PURE=1 gives it)
- raw_us:          the baseline: the same commits' frame decode, body decode, record
                   encode and RocksDB writes, with no runtime between them
- runtime_ratio:   us_per_commit / raw_us
- build:           which build of the hot path ran: compiled, or pure (the sources)
- api_version:     OffsetCommit's version the frames carry (--api-version): 0 JSON, 1 binary

Each figure is the least of --repeat runs. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchlib import log
from prometheus_client import CollectorRegistry

import kafkacoord
from kafkacoord.codecs import encode_record
from kafkacoord.coordinator.groups import shard as group_shard_module
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.groups.records import offset_commit_record, offset_commit_value
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.protocol import APIS_BY_KEY
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.binary import decode_body, encode_request_body
from kafkacoord.coordinator.protocol.binary_commit import BinaryOffsetCommit
from kafkacoord.coordinator.runtime import processor as processor_module
from kafkacoord.coordinator.runtime.appends import AppendPipeline
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.processor import TurnReplies, group_commits, run_turn
from kafkacoord.coordinator.runtime.shard import RawRecord
from kafkacoord.coordinator.runtime.writer import Delivered
from kafkacoord.gc_pause import raise_young_threshold
from kafkacoord.server.ops.observer import PrometheusObserver
from kafkacoord.server.services.dispatch import RequestDispatcher
from kafkacoord.storage.cache import CacheBatch, ShardId, StateCache
from kafkacoord.storage.fold import offsets_policy
from kafkacoord.wire.frames import FrameReader, RequestHeader, encode_request
from kafkacoord.wire.frames import decode_request as decode_frame

GROUPS, PARTITIONS, SHARDS = 16, 8, 8  # as bench/commit.py
OFFSET_COMMIT = next(key for key, spec in APIS_BY_KEY.items() if spec.name == "OffsetCommit")
TOPIC = "__kc_offsets"


class Connection:
    """What the dispatcher and the reply channel use of a listener connection."""

    closed = False
    principal = None
    peer = "bench"
    attachment: object = None

    def __init__(self) -> None:
        self.answered = 0

    def send(self, data: bytes, answered: int) -> None:
        self.answered += answered

    def reject(self, *args: object, **kwargs: object) -> None:
        raise AssertionError(f"a bench request was rejected: {args}")


class Writer:
    """Acknowledges batches when told to, with consecutive offsets."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Sequence[RawRecord], Delivered]] = []
        self.next_offset = 0

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        self.waiting.append((records, done))

    def acknowledge(self) -> None:
        waiting, self.waiting = self.waiting, []
        for records, done in waiting:
            start, self.next_offset = self.next_offset, self.next_offset + len(records)
            done(list(range(start, self.next_offset)), None)

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Processor:
    """The turn-level part of LoopProcessor, driven by the bench loop."""

    def __init__(self) -> None:
        self.replies = TurnReplies(self)
        self.woken: list[tuple[ShardHost, object]] = []

    def on_its_thread(self) -> bool:
        return True

    def put_many(self, events: list[tuple[ShardHost, object]]) -> None:
        self.woken.extend(events)


def frames(commits: int, version: int = 0) -> list[bytes]:
    out = []
    for i in range(commits):
        group = f"bench-{i % GROUPS}"
        partition = g.CommitPartition(partition=i % PARTITIONS, offset=i)
        topic = g.CommitTopic(name="events", partitions=[partition])
        body = g.OffsetCommit(group_id=group, topics=[topic])
        header = RequestHeader(OFFSET_COMMIT, version, i, partition_for(group, SHARDS), "bench")
        out.append(encode_request(header, encode_request_body(version, body)))
    return out


def timed(times: Counter[str], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[label] += time.perf_counter() - started

    return wrapper


SPLIT_LABELS = ["handle", "encode", "submit", "release", "store", "cache_write", "timers"]


def run_once(data: list[bytes], per_turn: int, split: bool) -> tuple[float, Counter[str]]:
    """One pass over ``data``: (process CPU seconds, wall seconds by layer)."""
    times: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp, StateCache(Path(tmp) / "cache") as cache:
        processor = Processor()
        commits = group_commits(processor.put_many, 4)
        observer = PrometheusObserver(CollectorRegistry())
        writers, hosts, by_shard = [], {}, {}
        now = int(time.time() * 1000)
        for partition in range(SHARDS):
            writer = Writer()
            parts = HostParts(
                store=cache.shard(ShardId(TOPIC, partition)), identity="bench",
                policy=offsets_policy(7 * 86_400_000), recover=_unused, make_shard=_unused,
                make_writer=lambda writer=writer: writer, replies=processor.replies,
            )  # fmt: skip
            host = ShardHost(f"offsets-{partition}", parts, observer=observer, processor=processor)
            # Attached as the daemon's processor would attach it once loaded.
            host.shard = GroupShard(GroupConfig(), partition)
            host.shard.on_loaded(now)
            host.appends.writer = writer
            host.state = HostState.ACTIVE
            writers.append(writer)
            hosts[id(host)] = host
            by_shard[partition] = host
        batch: list[tuple[ShardHost, object]] = []
        dispatcher = RequestDispatcher(
            lambda request: None,
            lambda requests: batch.extend((by_shard[s], r) for s, r in requests),
        )
        connection = Connection()
        reader = FrameReader(1 << 20)
        turn, restore = run_turn, _split(times) if split else None
        gc.collect()
        cpu = time.process_time()
        clock = time.perf_counter
        for start in range(0, len(data), per_turn):
            t0 = clock()
            read = [
                decode_frame(payload)
                for payload in reader.feed(b"".join(data[start : start + per_turn]))
            ]
            dispatcher(read, connection)  # type: ignore[arg-type]
            t1 = clock()
            events = processor.woken + batch
            processor.woken, batch[:] = [], []
            turn(hosts, events, commits)
            t2 = clock()
            processor.replies.flush()
            t3 = clock()
            for writer in writers:
                writer.acknowledge()
            t4 = clock()
            times["frames_and_dispatch"] += t1 - t0
            times["turn"] += t2 - t1
            times["replies"] += t3 - t2
            times["acknowledgements"] += t4 - t3
        for _ in range(3):  # the last turns' batches: acknowledged, folded, answered
            events, processor.woken = processor.woken, []
            turn(hosts, events, commits)
            processor.replies.flush()
            for writer in writers:
                writer.acknowledge()
        cpu = time.process_time() - cpu
        if restore is not None:
            restore()
        if connection.answered != len(data):
            raise RuntimeError(f"{connection.answered} of {len(data)} commits answered")
    return cpu, times


def _unused() -> Any:
    raise AssertionError("the bench attaches its hosts itself")


def _split(times: Counter[str]) -> Callable[[], None]:
    """Time the turn's parts; returns what puts the originals back."""
    targets = [
        (ShardHost, "_handle", "handle"), (AppendPipeline, "_submit_open", "submit"),
        (AppendPipeline, "_release", "release"), (AppendPipeline, "_store", "store"),
        # Records are encoded inside the handler's guard: "encode" is part of "handle".
        (GroupShard, "fire_timers", "timers"), (group_shard_module, "encode_records", "encode"),
        (processor_module, "_write_cache", "cache_write"),
    ]  # fmt: skip
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    for owner, name, label in targets:
        setattr(owner, name, timed(times, label, getattr(owner, name)))

    def restore() -> None:
        for owner, name, original in originals:
            setattr(owner, name, original)

    return restore


def raw_once(data: list[bytes], per_turn: int) -> float:
    """The baseline: decode, encode and store the same commits with nothing between."""
    spec = APIS_BY_KEY[OFFSET_COMMIT]
    now = int(time.time() * 1000)
    with tempfile.TemporaryDirectory() as tmp, StateCache(Path(tmp) / "cache") as cache:
        reader = FrameReader(1 << 20)
        gc.collect()
        cpu = time.process_time()
        for start in range(0, len(data), per_turn):
            staged = CacheBatch()
            for payload in reader.feed(b"".join(data[start : start + per_turn])):
                header, body = decode_frame(payload)
                request = decode_body(spec, header.api_version, body)
                assert isinstance(request, g.OffsetCommit | BinaryOffsetCommit)
                for topic in request.topics:
                    for p in topic.partitions:
                        value = offset_commit_value(p.offset, p.leader_epoch, p.metadata, now, -1)
                        record = offset_commit_record(
                            request.group_id, topic.name, p.partition, value
                        )
                        key, raw = encode_record(record.key, record.value)
                        assert raw is not None
                        staged.batch_for(cache._db, cache._write_options).put(key, raw)
            staged.write()
        return time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=40_000)
    parser.add_argument(
        "--per-turn",
        type=int,
        default=7,
        help="commits read per turn (bench/commit.py's peak averages about 7)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--api-version", type=int, choices=(0, 1), default=0,
        help="OffsetCommit's version: 0 sends JSON bodies, 1 binary ones",
    )  # fmt: skip
    args = parser.parse_args()
    raise_young_threshold()  # as the daemon does
    data = frames(args.commits, args.api_version)
    per = 1e6 / args.commits
    cpu = min(run_once(data, args.per_turn, split=False)[0] for _ in range(args.repeat))
    layers = [run_once(data, args.per_turn, split=False)[1] for _ in range(args.repeat)]
    # The split wraps methods in timers, which compiled classes do not allow.
    compiled = kafkacoord.BUILD is kafkacoord.compiled.Build.COMPILED
    split = (
        []
        if compiled
        else [run_once(data, args.per_turn, split=True)[1] for _ in range(args.repeat)]
    )
    raw = min(raw_once(data, args.per_turn) for _ in range(args.repeat))

    def least(runs: list[Counter[str]], keys: list[str]) -> dict[str, float]:
        return {k: round(min(run[k] for run in runs) * per, 1) for k in keys}

    result = {
        "build": kafkacoord.BUILD.value,
        "commits": args.commits,
        "per_turn": args.per_turn,
        "api_version": args.api_version,
        "us_per_commit": round(cpu * per, 1),
        "layers_us": least(layers, ["frames_and_dispatch", "turn", "replies", "acknowledgements"]),
        "turn_split_us": least(split, SPLIT_LABELS) if split else None,
        "raw_us": round(raw * per, 1),
        "runtime_ratio": round(cpu / raw, 2),
    }
    log(f"listener-side CPU per commit: {result['us_per_commit']} µs (raw {result['raw_us']})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
