"""Faults injected into every path of the shard runtime of a live daemon, on both brokers.

The daemon runs as ``tests.failures.fault_daemon``: the real daemon, with code paths a
test arms to throw once (a group handler, a record that cannot be encoded, an append, a
group timer, an internal event, a group shard's cache write, a controller timer and the
controller's cache write). After each fault the shard serves again within two seconds,
a request that met the fault got an error reply (never silence), and every commit
acknowledged before, during and after the faults is still there at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kafkacoord.client import ClassicProtocolMember
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.base import GroupChannel
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as c
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.failures.patching import SOURCES_ENV

from .cluster import DaemonProcess, Replicas, fast_daemon_env, wait_until

pytestmark = pytest.mark.integration

NODE = 100
TOPIC = "events"
SERVE_AGAIN_S = 2.0  # the promise: a failed shard serves again within this


@pytest.fixture
def faulty(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[tuple[DaemonProcess, Path]]:
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    faults = tmp_path / "faults"
    faults.mkdir()
    root = Path(__file__).parents[2]
    env = {
        **fast_daemon_env(bootstrap, prefix, 1),
        "KAFKACOORD_NODE_ID": str(NODE),
        "KAFKACOORD_DATA_DIR": str(tmp_path / "data"),
        "KAFKACOORD_TEST_FAULTS": str(faults),
        "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "300",
        "KAFKACOORD_GROUP_CONSUMER_METADATA_REFRESH_MS": "500",
        "KAFKACOORD_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS": "1",
        "PYTHONPATH": str(root),
        **SOURCES_ENV,
    }
    daemon = DaemonProcess(env, module="tests.failures.fault_daemon")
    try:
        daemon.wait_for("group shards active", timeout_s=120)
        yield daemon, faults
    finally:
        daemon.stop()


def _commit(channel: GroupChannel, group: str, offset: int, *, timeout_s: float = 30) -> None:
    partitions = [g.CommitPartition(partition=0, offset=offset)]
    body = g.OffsetCommit(group_id=group, topics=[g.CommitTopic(name=TOPIC, partitions=partitions)])
    response = channel.call(0, body, g.OffsetCommitResponse, timeout_s=timeout_s)
    [topic] = response.topics
    assert [p.error for p in topic.partitions] == [ErrorCode.NONE]


def _committed(channel: GroupChannel, group: str) -> int:
    response = channel.call(0, g.OffsetFetch(group_id=group), g.OffsetFetchResponse)
    return {(t.name, p.partition): p.offset for t in response.topics for p in t.partitions}.get(
        (TOPIC, 0), -1
    )


def _arm(faults: Path, name: str) -> None:
    (faults / name).touch()


def _fired(faults: Path, name: str) -> bool:
    return not (faults / name).exists()


def _at(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["timestamp"]).timestamp()


def _logged(daemon: DaemonProcess, text: str) -> list[dict[str, Any]]:
    return [e for e in list(daemon.events) if text in str(e.get("event", ""))]


def test_every_fault_leaves_the_shard_serving_and_loses_nothing_acknowledged(
    faulty: tuple[DaemonProcess, Path], bootstrap: str, prefix: str
) -> None:
    daemon, faults = faulty
    channel = GroupChannel(bootstrap, topic_prefix=prefix, offsets_partitions=1, timeout_s=60)
    acked: dict[str, int] = {}
    figures: dict[str, float] = {}

    def commit(group: str, offset: int, **kw: Any) -> None:
        _commit(channel, group, offset, **kw)
        acked[group] = offset

    def failing(fault: str, group: str, offset: int) -> RequestError:
        _arm(faults, fault)
        with pytest.raises(RequestError) as raised:
            _commit(channel, group, offset)
        assert _fired(faults, fault)
        return raised.value

    # A service node, so the controller has somewhere to place a topic.
    agent = NodeAgent(bootstrap, node_id=1, handler=Replicas(), topic_prefix=prefix,
                      heartbeat_interval_ms=500).start(timeout_s=60)  # fmt: skip
    try:
        commit("before", 1)

        # A handler that throws, and one whose record cannot be encoded: that request
        # alone gets an error, and the next commit to the shard is durable at once.
        for fault in ("handler", "encode"):
            error = failing(fault, f"{fault}-victim", 7)
            assert error.code is ErrorCode.UNKNOWN_SERVER_ERROR, error
            started = time.monotonic()
            commit(f"after-{fault}", 2)
            assert time.monotonic() - started < SERVE_AGAIN_S
            assert _committed(channel, f"{fault}-victim") == -1  # nothing of it was kept
        assert not _logged(daemon, "shard state suspect")  # put back, not reloaded

        # An append that fails: its caller is told to retry, the shard reloads in place
        # and the retry lands.
        _arm(faults, "append")
        started = time.monotonic()
        commit("after-append", 3)
        assert _fired(faults, "append")
        assert time.monotonic() - started < SERVE_AGAIN_S + 1  # the client's backoff

        # A group timer that throws: retried after a backoff, so the group forms anyway.
        _arm(faults, "group-timer")
        member = ClassicProtocolMember(
            bootstrap, "timer-group", [TOPIC], topic_prefix=prefix, offsets_partitions=1,
            session_timeout_ms=6000, heartbeat_interval_ms=500,
            partition_counts=lambda topics: dict.fromkeys(topics, 1),
        ).start()  # fmt: skip
        try:
            assert member.wait_assigned(30), "the group never formed"
            assert _fired(faults, "group-timer")
            assert _logged(daemon, "group timer")
            started = time.monotonic()
            commit("after-group-timer", 4)
            assert time.monotonic() - started < SERVE_AGAIN_S
        finally:
            member.close()

        # An internal event (new topics from the broker) that throws: retried.
        _arm(faults, "group-event")
        kafka_admin = admin_client(bootstrap)
        for future in kafka_admin.create_topics([_new_topic(f"grown-{prefix}")]).values():
            future.result(30)
        wait_until(lambda: _fired(faults, "group-event"), 30, "the topics event")
        wait_until(lambda: _logged(daemon, "shard event failed; retrying"), 10, "the retry")
        assert not _logged(daemon, "shard event failed again; dropped")
        commit("after-group-event", 5)

        # A group shard's cache write that throws stops its host: it restarts by itself.
        _arm(faults, "group-cache")
        with pytest.raises(RequestError):
            _commit(channel, "cache-victim", 6, timeout_s=0.5)
        wait_until(lambda: _logged(daemon, "group shard stopped; restarting it"), 10, "stop")
        commit("after-group-cache", 6)
        [stopped] = _logged(daemon, "group shard stopped; restarting it")
        active = [e for e in _logged(daemon, "group shards active") if _at(e) >= _at(stopped)]
        assert active, "the group shard never came back"
        figures["group_shard_back_s"] = round(_at(active[0]) - _at(stopped), 3)
        assert figures["group_shard_back_s"] < SERVE_AGAIN_S

        # A controller timer that throws: retried; the controller serves meanwhile.
        _arm(faults, "controller-timer")
        wait_until(lambda: _fired(faults, "controller-timer"), 10, "a controller timer")
        started = time.monotonic()
        _create_topic(channel, "after-controller-timer")
        assert time.monotonic() - started < SERVE_AGAIN_S
        assert _logged(daemon, "controller timer")

        # The controller's cache write that throws stops its host: it restarts by itself.
        _arm(faults, "controller-cache")
        _create_topic(channel, "after-controller-cache")
        assert _fired(faults, "controller-cache")
        [retrying] = _logged(daemon, "controller stopped; retrying activation")
        active = [e for e in _logged(daemon, "active with epoch") if _at(e) >= _at(retrying)]
        assert active, "the controller never came back"
        figures["controller_back_s"] = round(_at(active[0]) - _at(retrying), 3)
        assert figures["controller_back_s"] < SERVE_AGAIN_S

        # Nothing acknowledged was lost, and the daemon never went down.
        assert daemon.process.poll() is None
        assert {group: _committed(channel, group) for group in acked} == acked
        figures["acknowledged_commits_kept"] = len(acked)
        print("shard faults:", json.dumps(figures))  # read with -s
    finally:
        agent.close()
        channel.close()


def _new_topic(name: str) -> Any:
    from confluent_kafka.admin import NewTopic

    return NewTopic(name, num_partitions=1, replication_factor=1)


def _create_topic(channel: GroupChannel, name: str) -> None:
    """Create a logical topic: a controller decision, appended and folded into its cache.
    A retry after the first try became durable finds it there."""
    body = c.CreateTopic(name=name, num_partitions=1, replication_factor=1)
    try:
        channel.client.call(CONTROLLER, body, c.CreateTopicResponse, timeout_s=30)
    except RequestError as exc:
        assert exc.code is ErrorCode.TOPIC_ALREADY_EXISTS, exc
