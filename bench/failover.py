"""P3: fence the node that leads the most partitions; time until every partition it led
has a new leader durably appended, against a raw append of the same records.

Setup (not timed): an embedded broker, the real controller service (election lease,
transactional writer, RocksDB cache), 10 registered nodes and --partitions
partitions at RF 3 created through admin requests.

Measured in the same run:
- elect_s:      FenceNode request sent → reply received. The controller replies once
                the node record and every new leader are durably appended (acks=all,
                transaction committed), so this is fence → all new leaders durable.
- isr_shrunk_s: fence → the ISRs the node only followed have shrunk, durably too (the
                controller appends those after the reply, in batches of their own).
- records, leader_records: records of the whole fencing, and of the reply's batch.
- fence_value_bytes: the mean encoded size of the partition values the fencing wrote.
- raw_append_s: as many records as the whole fencing, already encoded, appended with
                the appender (idempotent, acks=all) to a scratch partition; ratio is
                raw_append_s / isr_shrunk_s.
- cold_start_s: a second controller with an empty cache: start → active. It follows the
                metadata log as a hot standby from its start (the default), so its
                load runs while its election is pending: a consumer group the broker
                answers (about 3 s on the embedded broker, which holds a join to an
                empty group back that long).
- cold_elected_s: of that, start → elected.
- cold_follow_s: start → the standby's first pass done (the whole log folded).
- cold_load_s:  elected → active: what is left of the standby's pass, the tail of the
                log since, replay into the image, and the new epoch appended.
                cold_load_phases splits the takeover: read (waiting on the log), fold,
                cache (RocksDB writes), replay, activate. first_fence_scans is apart:
                what the first fencing of a node after the load adds, the scans that
                build that node's sets of partitions led and followed.
- nostandby_start_s, nostandby_load_s, nostandby_load_phases: the same controller with
                the standby off (controller_standby=false), for comparison: it loads
                the whole log once elected, so start → active is election + load.
- peak_rss_mb:  the peak resident memory (VmHWM) of this process: the fenced
                controller and the bench's own driver.
- cold_load_rss_mb: the same of the cold controller's process (with the standby).

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.appender

from benchlib import BROKERS, broker_for, py_spy, stop_py_spy
from confluent_kafka.admin import NewTopic

from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.codecs import encode_record
from kafkacoord.codecs.models import PartitionKey
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.gc_pause import gc_paused
from kafkacoord.server.services.controller import ControllerService
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.server.services.factory import controller_service
from kafkacoord.server.settings import Settings
from kafkacoord.storage.cache import StateCache
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import ensure_topics
from kafkacoord.wire import Listener
from tests.appender import Appender

NODES = 10
RAW_TOPIC = "bench_raw_appends"
TIME_LIMIT_S = 900


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wait(check: object, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.05)


def run(
    bootstrap: str, partitions: int, per_topic: int, data_dir: Path, profile: str | None = None
) -> dict[str, object]:
    settings = Settings(
        bootstrap=bootstrap,
        topic_prefix="bench_",
        data_dir=data_dir,
        offsets_partitions=1,
        node_session_timeout_ms=3_600_000,
        auto_leader_rebalance_enable=False,
        controller_session_timeout_ms=6000,
    )
    topics = settings.topics
    identities = ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    kafka_admin = admin_client(bootstrap)
    kafka_admin.create_topics([NewTopic(RAW_TOPIC, 1, 1)])[RAW_TOPIC].result(30)
    cache = StateCache(data_dir / "cache")
    services: list[ControllerService] = []

    def no_groups(requests: list[tuple[int, Request]]) -> None:
        for _, request in requests:
            reject(request, ErrorCode.NOT_COORDINATOR)

    def to_controller(request: Request) -> None:
        services[0].dispatch(request)

    # Requests reach the controller over its listener, as in the daemon.
    listener = Listener("127.0.0.1", 0, RequestDispatcher(to_controller, no_groups)).start()
    service = controller_service(
        settings,
        bootstrap,
        cache,
        identities[topics.metadata],
        config=settings.controller_config(),
        endpoint=listener.endpoint,
    ).start()
    services.append(service)
    admin = ControllerAdmin(bootstrap, topics, timeout_s=120)
    try:
        wait(lambda: service.active, "controller activation")
        for node in range(1, NODES + 1):
            body = api.RegisterNode(node_id=node, incarnation=f"bench-{node}")
            registered = admin.call(body, api.RegisterNodeResponse)
            # The first heartbeat unfences a registered node (KRaft's lifecycle).
            admin.call(
                api.NodeHeartbeat(node_id=node, node_epoch=registered.node_epoch),
                api.NodeHeartbeatResponse,
            )
        started = time.monotonic()
        made = 0
        while made < partitions:
            count = min(per_topic, partitions - made)
            admin.create_topic(f"t{made // per_topic:04d}", count, 3)
            made += count
            if time.monotonic() - started > TIME_LIMIT_S:
                raise SystemExit("setup took too long")
        log(f"created {partitions} partitions in {time.monotonic() - started:.1f}s")
        shard = service.shard
        assert shard is not None
        image = shard.image
        victim = max(range(1, NODES + 1), key=lambda n: len(image.led_by(n)))
        led = set(image.led_by(victim))
        followed = set(image.in_isr_of(victim)) - led
        before = service.host.stats.records_written if service.host else 0
        log(f"fencing node {victim}, leader of {len(led)} partitions")

        profiler = py_spy(os.getpid(), f"{profile}.fence") if profile else None
        t0 = time.perf_counter()
        admin.fence_node(victim)
        elect_s = time.perf_counter() - t0
        if profiler is not None:
            stop_py_spy(profiler)

        assert service.host is not None
        host = service.host
        leaders_written = host.stats.records_written - before
        # The ISRs it only followed shrink after the reply, in batches: wait for them too.
        expected = 1 + len(led) + len(followed)
        wait(lambda: host.stats.records_written - before >= expected, "ISR shrinks", 600)
        isr_shrunk_s = time.perf_counter() - t0
        written = host.stats.records_written - before
        moved = sum(1 for tp in led if (p := image.partition(*tp)) and p.leader not in (victim, -1))
        still = [tp for tp in led if (p := image.partition(*tp)) and p.leader == victim]
        if still:
            raise SystemExit(f"{len(still)} partitions still led by the fenced node")
        log(
            f"fence: {leaders_written} records, {moved} new leaders in {elect_s:.3f}s; "
            f"{written - leaders_written} ISR shrinks durable at {isr_shrunk_s:.3f}s"
        )

        # The same records again, pre-encoded, through the plain appender.
        raw = [
            encode_record(PartitionKey(tp[0], tp[1]), image.partition(*tp))
            for tp in sorted(image.replicas_on(victim))
        ]
        raw = (raw * (written // max(len(raw), 1) + 1))[:written]
        with Appender(bootstrap, client_id="bench-raw") as appender:
            appender.append(RAW_TOPIC, 0, b"warm", b"up").result(30)
            t0 = time.perf_counter()
            futures = [appender.append(RAW_TOPIC, 0, k, v) for k, v in raw]
            for future in futures:
                future.result(60)
            raw_append_s = time.perf_counter() - t0
        log(f"raw append of {len(raw)} records: {raw_append_s:.3f}s")
        # The encoded size of the fencing's partition values (each carries its cause).
        value_bytes = sum(len(v or b"") for _, v in raw) / max(len(raw), 1)
        count = image.partition_count()
        peak_rss_mb = peak_rss()
        service.close()  # lets the cold controller win the election
        # Each in a process of its own, so that its memory is its own.
        cold = cold_start(settings, bootstrap, identities[topics.metadata], data_dir,
                          listener.endpoint, profile, standby=True)  # fmt: skip
        log(f"cold start (standby) of {count} partitions: {cold}")
        plain = cold_start(settings, bootstrap, identities[topics.metadata], data_dir,
                           listener.endpoint, None, standby=False)  # fmt: skip
        log(f"cold start (no standby): {plain}")
        return {
            "partitions": count,
            "moved": moved,
            "records": written,
            "leader_records": leaders_written,
            "elect_s": round(elect_s, 4),
            "isr_shrunk_s": round(isr_shrunk_s, 4),
            "raw_append_s": round(raw_append_s, 4),
            "ratio": round(raw_append_s / isr_shrunk_s, 3),
            "fence_value_bytes": round(value_bytes, 1),
            "cold_start_s": cold["start_s"],
            "cold_elected_s": cold["elected_s"],
            "cold_follow_s": cold["follow_s"],
            "cold_load_s": cold["load_s"],
            "cold_load_phases": cold["phases"],
            "nostandby_start_s": plain["start_s"],
            "nostandby_load_s": plain["load_s"],
            "nostandby_load_phases": plain["phases"],
            "peak_rss_mb": peak_rss_mb,
            "cold_load_rss_mb": cold["rss_mb"],
        }
    finally:
        admin.close()
        service.close()
        listener.close()
        cache.close()


def peak_rss() -> int:
    """This process's peak resident set in MB. VmHWM, not getrusage: ru_maxrss survives
    fork and exec, so a child would report its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def cold_start(  # noqa: PLR0917 (the parts of a cold controller, then its mode)
    settings: Settings,
    bootstrap: str,
    identity: str,
    data_dir: Path,
    endpoint: str,
    profile: str | None,
    *,
    standby: bool,
) -> dict[str, Any]:
    """:func:`cold_controller` in a fresh process."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(
            cold_controller, settings.model_copy(update={"controller_standby": standby}),
            bootstrap, identity, data_dir / f"cold-{standby}", endpoint, profile,
        ).result(timeout=600)  # fmt: skip


def cold_controller(  # noqa: PLR0917 (a pool task takes its arguments positionally)
    settings: Settings,
    bootstrap: str,
    identity: str,
    cache_dir: Path,
    endpoint: str,
    profile: str | None,
) -> dict[str, Any]:
    """A controller with an empty cache: start to elected, to the standby's first pass,
    to active; the takeover's seconds and phases; this process's peak RSS in MB."""
    profiler = py_spy(os.getpid(), f"{profile}.cold") if profile else None
    cache = StateCache(cache_dir)
    t0 = time.perf_counter()
    config = settings.controller_config()
    service = controller_service(settings, bootstrap, cache, identity, config=config,
                                 endpoint=endpoint).start()  # fmt: skip
    marks: dict[str, float] = {}

    def active() -> bool:
        now = time.perf_counter() - t0
        if service.elected:
            marks.setdefault("elected_s", now)
        if service.standby_passes:
            marks.setdefault("follow_s", now)
        return service.active

    try:
        wait(active, "cold controller activation", timeout_s=300)
        seconds = time.perf_counter() - t0
        if profiler is not None:
            stop_py_spy(profiler)
        assert service.host is not None and service.shard is not None
        stats = service.host.stats
        phases = {name: round(value, 2) for name, value in stats.load_phases.items()}
        # Paid by the first fencing of a node after a load: its sets of partitions led
        # and followed, built by a scan each when first asked for. Timed apart.
        image = service.shard.image
        busiest = max(image.leader_counts().items(), key=lambda item: item[1])[0]
        t1 = time.perf_counter()
        with gc_paused():  # as in a handler
            image.led_by(busiest)
            image.in_isr_of(busiest)
        phases["first_fence_scans"] = round(time.perf_counter() - t1, 2)
        return {
            "start_s": round(seconds, 2),
            "elected_s": round(marks.get("elected_s", seconds), 2),
            "follow_s": round(marks["follow_s"], 2) if "follow_s" in marks else None,
            "load_s": round(stats.load_seconds, 2),
            "log_records_read": stats.log_records_read,
            "phases": phases,
            "rss_mb": peak_rss(),
        }
    finally:
        service.close()
        cache.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--bootstrap", help="an existing cluster instead of the embedded broker")
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    parser.add_argument(
        "--profile", metavar="PREFIX",
        help="py-spy the fence (PREFIX.fence) and the cold load (PREFIX.cold), collapsed stacks",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.bootstrap:
            result = run(args.bootstrap, args.partitions, args.per_topic, Path(tmp), args.profile)
        else:
            with broker_for(args.broker, Path(tmp)) as broker:
                result = run(
                    broker.bootstrap, args.partitions, args.per_topic, Path(tmp), args.profile
                )
    print(json.dumps({"broker": "external" if args.bootstrap else args.broker, **result}))


if __name__ == "__main__":
    main()
