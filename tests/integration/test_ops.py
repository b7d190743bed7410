"""Operations end to end: a daemon process, real commits, then /metrics, /health and
``kafkacoord status --json`` checked against what the test did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kafkacoord.client import ClassicProtocolMember, GroupAdmin
from kafkacoord.coordinator.protocol import ErrorCode

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

NODE = 7
SHARDS = 4
EVENTS = {0: 10, 1: 5}  # records produced per partition


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float | None:  # fmt: skip
    return scraped.get((name, frozenset(labels.items())))


@pytest.fixture
def env(bootstrap: str, prefix: str) -> dict[str, str]:
    return {
        **fast_daemon_env(bootstrap, prefix, SHARDS),
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
    }


@pytest.fixture
def daemon(env: dict[str, str], tmp_path: Path) -> Iterator[DaemonProcess]:
    process = start_daemon(env, tmp_path, NODE)
    try:
        yield process
    finally:
        process.stop()


def _topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, len(EVENTS), 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in EVENTS.items():
        for i in range(count):
            producer.produce(name, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    return name


def _all_active(url: str) -> dict[str, Any] | None:
    status, body = get(f"{url}/health")
    health: dict[str, Any] = json.loads(body)
    shards = health["shards"]
    wanted = {"controller", *(f"offsets-{p}" for p in range(SHARDS))}
    return health if status == 200 and set(shards) == wanted else None


def _status(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacoord", "status", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metrics_health_and_status_report_what_happened(
    daemon: DaemonProcess, env: dict[str, str], bootstrap: str, prefix: str
) -> None:
    listening = daemon.wait_for("metrics and health endpoint listening", timeout_s=60)
    url = f"http://127.0.0.1:{listening['port']}"
    assert listening["port"] > 0
    health = wait_until(lambda: _all_active(url), timeout_s=90, what="every shard ACTIVE")
    assert health["status"] == "ready" and health["node_id"] == NODE
    assert health["broker_reachable"] is True
    assert set(health["shards"].values()) == {"ACTIVE"}
    assert health["controller"]["active"] is True

    topic = _topic(bootstrap, f"{prefix}events")
    stable, empty = f"{prefix}stable", f"{prefix}empty"
    member = ClassicProtocolMember(
        bootstrap, stable, [topic], topic_prefix=prefix, offsets_partitions=SHARDS,
        session_timeout_ms=6000, heartbeat_interval_ms=500,
    ).start()  # fmt: skip
    try:
        assert member.wait_assigned(60)
        assert set(member.assignment) == {(topic, 0), (topic, 1)}
        member.commit({(topic, 0): 3})
        member.commit({(topic, 0): 5})
        member.commit({(topic, 0): 7, (topic, 1): 5})
        with GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as admin:
            assert admin.reset_offsets(empty, {(topic, 0): 4}) == {(topic, 0): ErrorCode.NONE}
        commits = 4

        scraped = samples(get(f"{url}/metrics")[1])
        replies = value(scraped, "kafkacoord_replies_total", api="OffsetCommit", error="NONE")
        assert replies is not None and replies >= commits
        assert value(scraped, "kafkacoord_controller_active") == 1
        epoch = value(scraped, "kafkacoord_controller_epoch")
        assert epoch == health["controller"]["epoch"]
        for shard in ["controller", *(f"offsets-{p}" for p in range(SHARDS))]:
            seconds = value(scraped, "kafkacoord_shard_load_seconds", shard=shard)
            assert seconds is not None and seconds > 0, shard
            assert value(scraped, "kafkacoord_shard_loads_total", shard=shard) == 1
        appended = sum(
            v for (name, labels), v in scraped.items()
            if name == "kafkacoord_append_records_total" and ("shard", "controller") not in labels
        )  # fmt: skip
        assert appended >= commits  # each commit appends at least one record
        assert (value(scraped, "kafkacoord_append_seconds_count", kind="offsets") or 0) >= commits
        # The controller placed every group shard: one initial election each.
        assert (value(scraped, "kafkacoord_leader_elections_total", kind="initial") or 0) >= SHARDS
        assert value(scraped, "kafkacoord_shards", state="ACTIVE") == SHARDS + 1
        received = value(scraped, "kafkacoord_requests_received_total")
        assert received is not None and received >= commits
        assert (value(scraped, "kafkacoord_listener_connections") or 0) >= 1
        assert value(scraped, "kafkacoord_started") == 1

        summary = json.loads(_status(env, "--json"))
        assert summary["controller"]["node_id"] == NODE
        assert summary["controller"]["epoch"] == epoch
        assert [(n["id"], n["state"], n["roles"]) for n in summary["nodes"]] == [
            (NODE, "live", ["coordinator"])
        ]
        assert [(s["partition"], s["leader"], s["isr"]) for s in summary["offsets_shards"]] == [
            (p, NODE, [NODE]) for p in range(SHARDS)
        ]
        assert summary["partitions"]["under_replicated"]["count"] == 0
        assert summary["partitions"]["offline"]["count"] == 0
        groups = summary["groups"]
        assert groups["count"] == 2 and groups["error"] is None
        assert groups["by_state"] == {"Empty": 1, "Stable": 1}
        lags = {g["group"]: g["lag"] for g in groups["groups"]}
        assert lags == {stable: (10 - 7) + (5 - 5), empty: 10 - 4}
        assert groups["total_lag"] == 9

        text = _status(env)
        assert f"Controller: node {NODE}, epoch {int(epoch)}" in text
        assert "Groups: 2 (Empty: 1, Stable: 1), total lag 9" in text
    finally:
        member.close()
