"""Smoke tests against a broker container: daemons, the admin CLI, a node agent, a
consumer group commit, and a broker restart."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkacoord.client import ClassicProtocolMember, ConsumerProtocolMember
from kafkacoord.client.admin import read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.failures.broker import BrokerControl
from tests.integration.cluster import (
    DaemonProcess,
    Replicas,
    fast_daemon_env,
    start_daemon,
    wait_until,
)

from .containers import ContainerBroker

SHARDS = 2
DAEMONS = (100, 101)
AGENT = 1
HEALTHCHECK = Path(__file__).resolve().parents[2] / "deploy" / "healthcheck.py"


@dataclass
class Daemons:
    env: dict[str, str]
    processes: list[DaemonProcess]


def _cli(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "kafkacoord", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, f"kafkacoord {' '.join(args)}: {result.stderr}"
    return result.stdout


def _healthy(env: dict[str, str], *args: str) -> bool:
    """The images' HEALTHCHECK command, run the way Docker runs it: exit status 0 or not."""
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK), *args],
        env={**os.environ, **env}, capture_output=True, timeout=60,
    )  # fmt: skip
    return result.returncode == 0


@pytest.fixture
def daemons(e2e_bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[Daemons]:
    """Two daemon processes on the shared broker container."""
    topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
    ensure_topics(admin_client(e2e_bootstrap), topics.specs(), replication_factor=1)
    # Port 0: each daemon's /metrics and /health on a free port of its own.
    env = {**fast_daemon_env(e2e_bootstrap, prefix, SHARDS), "KAFKACOORD_METRICS_PORT": "0"}
    started: list[DaemonProcess] = []
    try:
        for node in DAEMONS:
            started.append(start_daemon(env, tmp_path, node))
        for daemon in started:
            daemon.wait_for("daemon ready", timeout_s=90)
        wait_until(
            lambda: all(
                (v := read_metadata(e2e_bootstrap, topics.metadata).partition(topics.offsets, s))
                and v.leader in DAEMONS
                for s in range(SHARDS)
            ),
            timeout_s=90, what="every group shard led by a daemon",
        )  # fmt: skip
        yield Daemons(env, started)
    finally:
        for daemon in started:
            daemon.stop()


def test_daemons_serve_admin_topics_a_node_agent_and_group_commits(
    daemons: Daemons, e2e_bootstrap: str, prefix: str
) -> None:
    env = daemons.env
    metadata_topic = InternalTopics(prefix=prefix).metadata
    image = read_metadata(e2e_bootstrap, metadata_topic)
    assert image.controller is not None and image.controller.node_id in DAEMONS

    # Each daemon's container health check passes once it is ready.
    for daemon in daemons.processes:
        port = str(daemon.wait_for("metrics and health endpoint listening")["port"])
        wait_until(partial(_healthy, env, "http", "--port", port), timeout_s=60,
                   what=f"/health on port {port} answers 200")  # fmt: skip

    # A service node joins; the CLI creates a topic placed on it, and it becomes leader.
    assert not _healthy(env, "node", str(AGENT))
    replicas = Replicas()
    agent = NodeAgent(e2e_bootstrap, node_id=AGENT, handler=replicas, topic_prefix=prefix,
                      heartbeat_interval_ms=500)  # fmt: skip
    replicas.agent = agent
    agent.start(timeout_s=60)
    try:
        created = _cli(env, "topics", "create", "--topic", "kv", "--replica-assignment",
                       f"{AGENT},{AGENT}")  # fmt: skip
        assert "Created topic kv." in created
        wait_until(lambda: replicas.leading() == {("kv", 0), ("kv", 1)}, timeout_s=60,
                   what="the node agent leads both partitions of kv")  # fmt: skip
        described = _cli(env, "topics", "describe", "--topic", "kv")
        assert "PartitionCount: 2" in described
        assert f"Leader: {AGENT}" in described
        assert _healthy(env, "node", str(AGENT))
    finally:
        agent.close()

    # A consumer group coordinated by the daemons commits, and reads the offset back.
    events = f"{prefix}events"
    group = f"{prefix}billing"
    kafka_admin = AdminClient({"bootstrap.servers": e2e_bootstrap})  # kept until the futures end
    for future in kafka_admin.create_topics([NewTopic(events, 3, 1)]).values():
        future.result(30)
    member = ClassicProtocolMember(e2e_bootstrap, group, [events], topic_prefix=prefix,
                                   offsets_partitions=SHARDS, session_timeout_ms=6000,
                                   heartbeat_interval_ms=500).start()  # fmt: skip
    try:
        assert member.wait_assigned(60), "the member never got a stable assignment"
        assert member.assignment == {(events, p) for p in range(3)}
        member.commit({(events, 0): 42, (events, 2): 7})
        assert member.committed() == {(events, 0): 42, (events, 2): 7}
        assert _healthy(env, "group", group)
    finally:
        member.close()
    assert not _healthy(env, "group", group)  # left: the group is empty
    described_group = _cli(env, "groups", "describe", "--group", group)
    rows = [line.split()[:4] for line in described_group.splitlines()]
    assert [group, events, "0", "42"] in rows, described_group


def test_restarted_broker_answers_again_on_the_same_address(
    restartable_broker: ContainerBroker,
) -> None:
    broker: BrokerControl = restartable_broker
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("before-restart", 1, 1)]).values():
        future.result(30)
    # A created topic reaches the broker's metadata cache a moment after CreateTopics answers.
    wait_until(lambda: "before-restart" in admin.list_topics(timeout=10).topics, 30,
               "the topic listed")  # fmt: skip

    broker.restart()

    assert broker.bootstrap == bootstrap
    after = AdminClient({"bootstrap.servers": bootstrap})
    topics = set(after.list_topics(timeout=10).topics)
    if broker.loses_data_on_restart:
        assert "before-restart" not in topics
    else:
        assert "before-restart" in topics


def test_consumer_protocol_group_against_a_broker_container(
    daemons: Daemons, e2e_bootstrap: str, prefix: str
) -> None:
    """KIP-848 members coordinated by the daemons: server-side assignment, commits at the
    member epoch, and the CLI's consumer group columns."""
    env = daemons.env
    topic, group = f"{prefix}orders", f"{prefix}kip848"
    kafka_admin = AdminClient({"bootstrap.servers": e2e_bootstrap})
    for future in kafka_admin.create_topics([NewTopic(topic, 4, 1)]).values():
        future.result(30)
    members = [
        ConsumerProtocolMember(e2e_bootstrap, group, [topic], topic_prefix=prefix,
                               offsets_partitions=SHARDS, rebalance_timeout_ms=15_000).start()
        for _ in range(2)
    ]  # fmt: skip
    try:
        everything = {(topic, p) for p in range(4)}

        def settled() -> bool:
            owned = [tp for m in members for tp in m.assignment]
            return (all(m.wait_assigned(0) for m in members) and len(owned) == 4
                    and set(owned) == everything
                    and len({m.generation for m in members}) == 1)  # fmt: skip

        wait_until(settled, timeout_s=90, what="two consumer-protocol members share 4 partitions")
        assert {len(m.assignment) for m in members} == {2}
        offsets = {tp: 10 + tp[1] for tp in members[0].assignment}
        members[0].commit(offsets)
        assert members[1].committed() == offsets
        assert _healthy(env, "group", group)
        state = _cli(env, "groups", "describe", "--group", group, "--state")
        row = state.splitlines()[1].split()
        epoch = str(members[0].generation)
        assert row[0] == group and "Consumer" in row and "Stable" in row, state
        assert row[-3:] == [epoch, epoch, "2"], state  # group epoch, target epoch, members
        described = _cli(env, "groups", "describe", "--group", group, "--members")
        rows = [line.split() for line in described.splitlines()[1:]]
        assert {r[1] for r in rows} == {m.member_id for m in members}, described
        assert all(epoch in r and "STABLE" in r for r in rows), described
    finally:
        for m in members:
            m.close()
