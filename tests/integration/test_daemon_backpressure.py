"""A live daemon and a client that pipelines OffsetCommit requests without reading a reply.

The daemon stops reading that connection once its unsent replies pass the high-water
mark, so its memory stays bounded, and a well-behaved client's commits on the same
shard stay prompt. The greedy commits name a generation of a group that does not
exist: each is answered (ILLEGAL_GENERATION on every partition, as Kafka does) and
appends nothing, so the broker's speed does not enter into it.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.apis import encode_body
from kafkacoord.wire.frames import RequestHeader, encode_request
from tests.rawwire import read_response

from .cluster import DaemonProcess, fast_daemon_env, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
MIB = 1024 * 1024
GREEDY_REQUESTS = 40_000
TOPICS_PER_COMMIT = 16
# The daemon's defaults: 1000 requests in flight, 1 MiB write-buffer high water. Its
# unsent replies stay under 1 MiB + 1000 x ~5 KiB; the decoded requests in flight, their
# replies and the allocator's slack come on top (about 47 MiB in all, measured).
# Unbounded, the unsent replies alone would be GREEDY_REQUESTS x ~5 KiB (440 MiB grown).
RSS_GROWTH_BOUND = 64 * MIB
GOOD_COMMITS = 100
P99_BOUND_S = 1.0


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _commit(group: str, partition: int) -> g.OffsetCommit:
    topic = g.CommitTopic(name="t", partitions=[g.CommitPartition(partition=partition,
                                                                   offset=partition)])  # fmt: skip
    return g.OffsetCommit(group_id=group, topics=[topic])


def _greedy_frames(group: str, shard: int) -> tuple[bytes, int]:
    """GREEDY_REQUESTS commits of a generation the daemon does not know, and the size
    of the reply each gets."""
    names = [f"{i:03d}-" + "t" * 236 for i in range(TOPICS_PER_COMMIT)]
    body = encode_body(g.OffsetCommit(
        group_id=group, generation_id=1, member_id="greedy",
        topics=[g.CommitTopic(name=n, partitions=[g.CommitPartition(partition=0, offset=1)])
                for n in names],
    ))  # fmt: skip
    reply = encode_body(g.OffsetCommitResponse(topics=[
        g.TopicErrors(name=n, partitions=[
            g.PartitionError(partition=0, error=ErrorCode.ILLEGAL_GENERATION)])
        for n in names
    ]))  # fmt: skip
    key = ALL_APIS["OffsetCommit"].key
    frames = [encode_request(RequestHeader(key, 0, i, shard, "greedy"), body)
              for i in range(GREEDY_REQUESTS)]  # fmt: skip
    return b"".join(frames), len(reply)


def test_a_client_not_reading_its_commit_replies_costs_bounded_memory_and_delays_no_one(
    bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    env = {**fast_daemon_env(bootstrap, prefix, PARTITIONS),
           "KAFKACOORD_DATA_DIR": str(tmp_path / "node")}  # fmt: skip
    daemon = DaemonProcess(env)
    try:
        endpoint = str(daemon.wait_for("daemon ready", timeout_s=120)["endpoint"])
        pid = daemon.process.pid
        shard = partition_for("good", PARTITIONS)
        greedy_group = next(f"greedy{i}" for i in range(1000)
                            if partition_for(f"greedy{i}", PARTITIONS) == shard)  # fmt: skip
        blob, reply_size = _greedy_frames(greedy_group, shard)
        # Unbounded, the unsent replies alone would be far more.
        assert GREEDY_REQUESTS * reply_size > 2.5 * RSS_GROWTH_BOUND
        with CoordinatorClient(bootstrap, topic_prefix=prefix) as client:
            routes = client.routes
            assert routes.wait_ready(60)
            wait_until(lambda: routes.endpoint(shard) == endpoint, timeout_s=60,
                       what="the shard routed to the daemon")  # fmt: skip
            for i in range(20):  # warm-up: the shard and the client's connection
                client.call(shard, _commit("good", i), g.OffsetCommitResponse, timeout_s=60)
            baseline = _rss(pid)

            host, _, port = endpoint.rpartition(":")
            greedy = socket.socket()
            greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            greedy.connect((host, int(port)))
            sender = threading.Thread(target=greedy.sendall, args=(blob,), daemon=True)
            peak = [baseline]
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.wait(0.05):
                    peak[0] = max(peak[0], _rss(pid))

            sampler = threading.Thread(target=sample, daemon=True)
            with greedy:
                sender.start()
                sampler.start()
                time.sleep(1.0)  # the greedy one has filled what the daemon lets it
                latencies = []
                for i in range(GOOD_COMMITS):
                    started = time.monotonic()
                    response = client.call(
                        shard, _commit("good", i % 8), g.OffsetCommitResponse, timeout_s=30
                    )
                    latencies.append(time.monotonic() - started)
                    errors = {p.error for t in response.topics for p in t.partitions}
                    assert errors == {ErrorCode.NONE}
                time.sleep(1.0)
                sampling.set()
                sampler.join(10)
                latencies.sort()
                p99 = latencies[int(len(latencies) * 0.99)]
                print(f"rss growth {(peak[0] - baseline) / MIB:.1f} MiB, "
                      f"good commits p50 {latencies[len(latencies) // 2] * 1000:.1f} ms "
                      f"p99 {p99 * 1000:.1f} ms")  # fmt: skip
                # Still sending: the daemon stopped reading it long before the end.
                assert sender.is_alive()
                assert peak[0] - baseline <= RSS_GROWTH_BOUND, (
                    f"RSS grew {(peak[0] - baseline) / MIB:.1f} MiB"
                )
                assert p99 < P99_BOUND_S

                # It reads at last: every commit is answered, in order, none dropped.
                greedy.settimeout(120)
                for i in range(GREEDY_REQUESTS):
                    reply = read_response(greedy)
                    assert (reply.correlation_id, reply.error_code) == (
                        i, ErrorCode.ILLEGAL_GENERATION
                    )  # fmt: skip
                sender.join(30)
                assert not sender.is_alive()
    finally:
        daemon.stop()
    assert daemon.process.returncode == 0
