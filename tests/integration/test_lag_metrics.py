"""Lag on /metrics: a daemon with the console off samples the group it leads; the group
commits at the log end (OK), then stops committing while records keep arriving."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kafkacoord.client import ClassicProtocolMember

from .cluster import DaemonProcess, fast_daemon_env, start_daemon

pytestmark = pytest.mark.integration

NODE = 9
SHARDS = 2
Scraped = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def daemon(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[DaemonProcess]:
    env = {
        **fast_daemon_env(bootstrap, prefix, SHARDS),
        "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
        "KAFKACOORD_CONSOLE": "false",
        "KAFKACOORD_CONSOLE_LAG_INTERVAL_MS": "200",
    }
    process = start_daemon(env, tmp_path, NODE)
    try:
        yield process
    finally:
        process.stop()


def _scrape(url: str) -> Scraped:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(scraped: Scraped, name: str, **labels: str) -> float | None:
    return scraped.get((name, frozenset(labels.items())))


def test_lag_rises_and_the_status_leaves_ok_when_the_group_stops_committing(
    daemon: DaemonProcess, bootstrap: str, prefix: str
) -> None:
    listening = daemon.wait_for("metrics and health endpoint listening", timeout_s=60)
    url = f"http://127.0.0.1:{listening['port']}"
    daemon.wait_for("group shards active", timeout_s=60, leading=SHARDS)
    topic, group = f"{prefix}orders", f"{prefix}billing"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    produced = 0

    def produce() -> None:
        nonlocal produced
        producer.produce(topic, value=b"%d" % produced, partition=0)
        assert producer.flush(10) == 0
        produced += 1

    member = ClassicProtocolMember(
        bootstrap, group, [topic], topic_prefix=prefix, offsets_partitions=SHARDS,
        session_timeout_ms=6000, heartbeat_interval_ms=500,
    ).start()  # fmt: skip
    try:
        assert member.wait_assigned(60)
        # Caught up: commit the log end after every record, until the daemon reports OK.
        deadline, ok = time.monotonic() + 30, False
        while not ok and time.monotonic() < deadline:
            produce()
            member.commit({(topic, 0): produced})
            scraped = _scrape(url)
            ok = _get(scraped, "kafkacoord_group_status", group=group, status="OK") == 1
            time.sleep(0.1)
        assert ok, f"no OK status for {group} within 30 s"
        assert _get(scraped, "kafkacoord_group_lag", group=group) == 0
        committed = produced

        # Stopped: records keep arriving, nothing is committed.
        deadline, judged = time.monotonic() + 30, None
        while judged is None and time.monotonic() < deadline:
            produce()
            scraped = _scrape(url)
            if _get(scraped, "kafkacoord_group_status", group=group, status="OK") == 0:
                judged = scraped
            time.sleep(0.1)
        assert judged is not None, f"{group} still OK after 30 s without commits"
        current = [
            s for s in ("WARN", "ERR")
            if _get(judged, "kafkacoord_group_status", group=group, status=s) == 1
        ]  # fmt: skip
        # Burrow: no commit for longer than the window spans, the lag never back to 0: STOP.
        assert current == ["ERR"]
        lag = _get(judged, "kafkacoord_group_lag", group=group)
        assert lag is not None and 0 < lag <= produced - committed
        partition = {"group": group, "topic": topic, "partition": "0"}
        assert _get(judged, "kafkacoord_partition_lag", **partition) == lag
        assert _get(judged, "kafkacoord_group_lag_max", group=group) == lag
        assert _get(judged, "kafkacoord_partition_lag_dropped") == 0
    finally:
        member.close()
