"""The daemon as a process: readiness, clean shutdown, and kill -9 in the middle of a load."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkacoord.client.connector import CoordinatorClient, error_of
from kafkacoord.client.routes import CONTROLLER
from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode, encode_body
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.rawwire import closed_by_peer, connect, raw_call

from .cluster import DaemonProcess
from .helpers import append_all, expected_state, read_partition

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture
def daemon_env(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {
        "KAFKACOORD_BOOTSTRAP": bootstrap,
        "KAFKACOORD_TOPIC_PREFIX": prefix,
        "KAFKACOORD_OFFSETS_PARTITIONS": str(PARTITIONS),
        "KAFKACOORD_DATA_DIR": str(tmp_path / "node"),
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_LOAD_CHUNK_RECORDS": "1000",
        "KAFKACOORD_LOAD_PROGRESS_INTERVAL_S": "0.05",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_METRICS_PORT": "0",
    }


def test_daemon_reports_ready_and_stops_cleanly_on_sigterm(daemon_env: dict[str, str]) -> None:
    daemon = DaemonProcess(daemon_env)
    ready = daemon.wait_for("daemon ready")
    assert ready["shards"] == PARTITIONS + 1
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(30) == 0
    assert daemon.has("daemon stopped")


def test_clients_find_the_daemon_from_the_metadata_and_garbage_leaves_it_serving(
    bootstrap: str, prefix: str, daemon_env: dict[str, str]
) -> None:
    daemon = DaemonProcess(daemon_env)
    try:
        endpoint = daemon.wait_for("daemon ready")["endpoint"]
        assert daemon.wait_for("listening")["endpoint"] == endpoint
        with CoordinatorClient(bootstrap, topic_prefix=prefix) as client:
            # The controller's record and the daemon's registration both name it.
            routes = client.routes
            assert routes.wait_ready(30)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                routes.endpoint(CONTROLLER) == endpoint
                and all(routes.endpoint(s) == endpoint for s in range(PARTITIONS))
            ):
                routes.wait_change(routes.version, 1.0)
            assert routes.endpoint(CONTROLLER) == endpoint
            assert [routes.endpoint(s) for s in range(PARTITIONS)] == [endpoint] * PARTITIONS
            shard = partition_for("g1", PARTITIONS)
            commit = g.OffsetCommit(group_id="g1", topics=[g.CommitTopic(
                name="t", partitions=[g.CommitPartition(partition=0, offset=42)])])  # fmt: skip
            # The client sends OffsetCommit's binary body (version 1); an older client's
            # JSON one (version 0) is served alike.
            assert client.version_for(endpoint, ALL_APIS["OffsetCommit"]) == 1
            client.call(shard, commit, g.OffsetCommitResponse, timeout_s=60)
            old = g.OffsetCommit(group_id="g1", topics=[g.CommitTopic(
                name="t", partitions=[g.CommitPartition(partition=1, offset=7)])])  # fmt: skip
            answer = raw_call(endpoint, ALL_APIS["OffsetCommit"].key, encode_body(old),
                              shard=shard, version=0)  # fmt: skip
            assert error_of(answer) is ErrorCode.NONE
            assert g.OffsetCommitResponse.model_validate_json(answer.body).topics[0].name == "t"
            with connect(endpoint) as garbage:
                garbage.sendall(b"\x00\x00\x00\x05hello")
                assert closed_by_peer(garbage)
            with connect(endpoint) as oversize:
                oversize.sendall(b"\x7f\xff\xff\xff" + b"x" * 64)
                assert closed_by_peer(oversize)
            fetched = client.call(shard, g.OffsetFetch(group_id="g1"), g.OffsetFetchResponse)
            assert [(t.name, [p.offset for p in t.partitions]) for t in fetched.topics] == [
                ("t", [42, 7])
            ]
    finally:
        daemon.stop()
    assert daemon.process.returncode == 0


def test_wrong_topic_config_stops_the_daemon_with_a_clear_error(
    bootstrap: str, prefix: str, daemon_env: dict[str, str]
) -> None:
    ensure_topics(
        admin_client(bootstrap), InternalTopics(prefix=prefix, offsets_partitions=2).specs(),
        replication_factor=1,
    )  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "kafkacoord", "daemon"],
        env={**os.environ, **daemon_env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"'{prefix}offsets' has 2 partitions" in result.stderr


def test_kill_9_mid_load_leaves_a_consistent_cache_and_restart_resumes(
    bootstrap: str, prefix: str, daemon_env: dict[str, str], tmp_path: Path
) -> None:
    topics = InternalTopics(prefix=prefix, offsets_partitions=PARTITIONS)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    rng = random.Random(9)
    records = []
    for i in range(200_000):
        key = encode_key(OffsetCommitKey(f"g{rng.randrange(500)}", "t", rng.randrange(8)))
        value = None if rng.random() < 0.05 else encode_value(OffsetCommitValue(i, "", i))
        records.append((rng.randrange(PARTITIONS), key, value))
    append_all(bootstrap, topics.offsets, records)
    logs = {p: read_partition(bootstrap, topics.offsets, p) for p in range(PARTITIONS)}

    daemon = DaemonProcess(daemon_env)
    daemon.wait_for("loading", topic=topics.offsets)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait(30)
    assert not daemon.has("daemon ready"), "the load finished before the kill; nothing was tested"

    cache_path = tmp_path / "node" / "cache"
    checkpoints = {}
    with StateCache(cache_path) as cache:
        for p in range(PARTITIONS):
            store = cache.shard(ShardId(topics.offsets, p))
            checkpoint = store.checkpoint()
            checkpoints[p] = 0 if checkpoint is None else checkpoint.next_offset
            # Whatever the kill interrupted, the cache is exactly the log's prefix.
            assert dict(store.items()) == expected_state(logs[p][: checkpoints[p]])
    assert 0 < sum(checkpoints.values()) < len(records)

    daemon = DaemonProcess(daemon_env)
    ready = daemon.wait_for("daemon ready")
    assert ready["records_replayed"] == len(records) - sum(checkpoints.values())
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(30) == 0

    with StateCache(cache_path) as cache:
        for p in range(PARTITIONS):
            store = cache.shard(ShardId(topics.offsets, p))
            assert dict(store.items()) == expected_state(logs[p])
            checkpoint = store.checkpoint()
            assert checkpoint is not None and checkpoint.next_offset == len(logs[p])
