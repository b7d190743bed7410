"""Parity with Kafka's tools: ``groups reset-offsets``' scenarios and CSV (round-tripped
with Kafka 4.4's own kafka-consumer-groups against the broker's own group coordinator),
``topics describe --configs`` and ``topics create --if-not-exists``. One daemon on the
embedded Apache Kafka serves the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from jsonschema import Draft202012Validator

from kafkacoord.cli.common import ExitCode
from kafkacoord.client import ClassicProtocolMember, GroupAdmin, group_admin
from kafkacoord.client.admin import read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.errors import RequestError
from kafkacoord.client.group_admin import RESET_CHUNK_PARTITIONS
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.storage.kafka_jars import java_binary, kafka_classpath
from kafkacoord.storage.topics import InternalTopics

from .cluster import Replicas, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

DAEMON, NODE, SHARDS = 7, 1, 2
OLD, NEW = 3, 7  # partition 0: records 3 hours old, then fresh ones; partition 1: old only
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Parity:
    bootstrap: str
    prefix: str
    env: dict[str, str]
    topic: str  # a Kafka topic with timestamped records, for the groups
    root: Path

    def run(self, *args: str, code: int = ExitCode.OK) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "kafkacoord", *args], env={**os.environ, **self.env},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr[-2000:])
        return done.stdout + done.stderr if code else done.stdout

    def answer(self, schema: str, *args: str) -> Any:
        document = json.loads(self.run(*args, "--output", "json"))
        text = resources.files("kafkacoord.cli").joinpath(f"schemas/{schema}.json").read_text()
        Draft202012Validator(json.loads(text)).validate(document)
        return document

    def admin(self) -> GroupAdmin:
        return GroupAdmin(self.bootstrap, topic_prefix=self.prefix, offsets_partitions=SHARDS)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        with self.admin() as admin:
            return {tp: p.offset for tp, p in admin.committed(group).items()}

    def seed(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        with self.admin() as admin:
            assert set(admin.reset_offsets(group, offsets).values()) == {0}


@pytest.fixture(scope="module")
def parity(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Parity]:
    prefix = f"p{uuid.uuid4().hex[:10]}_"
    env = {**fast_daemon_env(kafka_bootstrap, prefix, SHARDS),
           "KAFKACOORD_AUTO_LEADER_REBALANCE_ENABLE": "false",
           "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}  # fmt: skip
    root = tmp_path_factory.mktemp("parity")
    process = start_daemon(env, root, DAEMON)
    agent: NodeAgent | None = None
    try:
        process.wait_for("daemon ready", timeout_s=120)
        agent = NodeAgent(kafka_bootstrap, node_id=NODE, handler=Replicas(), topic_prefix=prefix,
                          heartbeat_interval_ms=500).start(timeout_s=120)  # fmt: skip
        metadata = InternalTopics(prefix=prefix).metadata
        wait_until(
            lambda: NODE in read_metadata(kafka_bootstrap, metadata).live_nodes(),
            timeout_s=120, what="node 1 live",
        )  # fmt: skip
        yield Parity(kafka_bootstrap, prefix, env, _events(kafka_bootstrap, f"{prefix}events"),
                     root)  # fmt: skip
    finally:
        if agent is not None:
            agent.close()
        process.stop()


def _events(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    now = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(OLD):
        for partition in (0, 1):
            producer.produce(topic, b"old", partition=partition, timestamp=now - 3 * HOUR_MS + i)
    for _ in range(NEW):
        producer.produce(topic, b"new", partition=0, timestamp=now)
    assert producer.flush(30) == 0
    return topic


def test_every_reset_scenario_against_a_daemon(parity: Parity) -> None:
    t, run = parity.topic, parity.run
    g1, g2 = f"{parity.prefix}g1", f"{parity.prefix}g2"
    parity.seed(g1, {(t, 0): 2})
    parity.seed(g2, {(t, 1): 1})

    # --to-current: the commit, and the log end where none is; a dry run by default.
    current = parity.answer("groups-reset-offsets", "groups", "reset-offsets", "--group", g1,
                            "--topic", t, "--to-current")  # fmt: skip
    assert current == {"executed": False, "groups": [{"group_id": g1, "partitions": [
        {"topic": t, "partition": 0, "new_offset": 2, "error": None},
        {"topic": t, "partition": 1, "new_offset": OLD, "error": None}]}]}  # fmt: skip
    # --shift-by needs a commit on every partition, as in Kafka.
    refused = run("groups", "reset-offsets", "-g", g1, "--topic", t, "--shift-by", "1",
                  code=ExitCode.USAGE)  # fmt: skip
    assert f"Cannot shift offset for partition {t}-1 since there is no current" in refused
    assert run("groups", "reset-offsets", "-g", g1, "--topic", t, "--to-earliest", "--dry-run",
               "--execute", code=ExitCode.USAGE)  # fmt: skip

    # --by-duration: the first record at or after an hour ago; none on partition 1: its end.
    csv = run("groups", "reset-offsets", "-g", g1, "--topic", t, "--by-duration", "PT1H",
              "--dry-run", "--export")  # fmt: skip
    assert csv == f"{t},0,{OLD}\n{t},1,{OLD}\n"
    # --to-datetime the same instant, in Kafka's format: without a zone it is UTC.
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000")
    assert run("groups", "reset-offsets", "-g", g1, "--topic", t, "--to-datetime", hour_ago,
               "--export") == csv  # fmt: skip
    assert parity.committed(g1) == {(t, 0): 2}  # a dry run changes nothing
    plan = parity.root / "g1.csv"
    plan.write_text(csv)
    table = run("groups", "reset-offsets", "-g", g1, "--from-file", str(plan), "--execute")
    assert table.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert parity.committed(g1) == {(t, 0): OLD, (t, 1): OLD}

    # Several groups, or --all-groups: group,topic,partition,offset lines, each group's own.
    both = run("groups", "reset-offsets", "--all-groups", "--all-topics", "--to-latest",
               "--export")  # fmt: skip
    assert both == f"{g1},{t},0,{OLD + NEW}\n{g1},{t},1,{OLD}\n{g2},{t},1,{OLD}\n"
    assert run("groups", "reset-offsets", "-g", g1, "-g", g2, "--all-topics", "--to-latest",
               "--export") == both  # fmt: skip
    plan.write_text(f"{g1},{t},0,5\n{g2},{t},1,0\n")
    run("groups", "reset-offsets", "-g", g1, "-g", g2, "--from-file", str(plan), "--execute")
    assert (parity.committed(g1), parity.committed(g2)) == (
        {(t, 0): 5, (t, 1): OLD}, {(t, 1): 0})  # fmt: skip
    # A file naming a partition the topic does not have: not found, nothing applied.
    plan.write_text(f"{t},9,1\n")
    missing = run("groups", "reset-offsets", "-g", g1, "--from-file", str(plan), "--execute",
                  code=ExitCode.NOT_FOUND)  # fmt: skip
    assert f"Partition {t}-9 does not exist" in missing

    # A group with a member is not reset: Kafka's refusal, exit 4.
    member = ClassicProtocolMember(
        parity.bootstrap, g2, [t], topic_prefix=parity.prefix, offsets_partitions=SHARDS,
        session_timeout_ms=6000, heartbeat_interval_ms=500,
    ).start()  # fmt: skip
    try:
        assert member.wait_assigned(60)
        busy = run("groups", "reset-offsets", "-g", g2, "--all-topics", "--to-earliest",
                   "--execute", code=ExitCode.REFUSED)  # fmt: skip
        assert f"Assignments can only be reset if the group '{g2}' is inactive, but the " \
               "current state is Stable." in busy  # fmt: skip
    finally:
        member.close()
    assert parity.committed(g2) == {(t, 1): 0}


def kafka_groups_tool(bootstrap: str, *args: str) -> str:
    """Kafka 4.4's own kafka-consumer-groups, on the broker's group coordinator."""
    done = subprocess.run(
        [java_binary(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-cp", kafka_classpath(), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
         "--bootstrap-server", bootstrap, "--reset-offsets", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Error" not in done.stdout, (args, done.stdout, done.stderr)
    return done.stdout


def kafka_committed(bootstrap: str, group: str, topic: str) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def test_the_reset_csv_round_trips_with_kafkas_own_tool(parity: Parity) -> None:
    t, bootstrap = parity.topic, parity.bootstrap
    # The same group ids on both coordinators: Kafka's own, and kafkacoord's.
    ka, kb = f"{parity.prefix}ka", f"{parity.prefix}kb"
    for group, offsets in ((ka, [(0, 4), (1, 2)]), (kb, [(0, 6)])):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition(t, p, o) for p, o in offsets],
                            asynchronous=False)  # fmt: skip
        finally:
            consumer.close()

    # Kafka's export of two groups (group,topic,partition,offset) sets kafkacoord's groups.
    exported = kafka_groups_tool(bootstrap, "--group", ka, "--group", kb, "--all-topics",
                                 "--to-current", "--dry-run", "--export")  # fmt: skip
    plan = parity.root / "from-kafka.csv"
    plan.write_text(exported)
    parity.run("groups", "reset-offsets", "-g", ka, "-g", kb, "--from-file", str(plan),
               "--execute")  # fmt: skip
    assert parity.committed(ka) == {(t, 0): 4, (t, 1): 2}
    assert parity.committed(kb) == {(t, 0): 6}

    # kafkacoord's export of one group (topic,partition,offset) sets Kafka's group.
    exported = parity.run("groups", "reset-offsets", "-g", ka, "--topic", t, "--shift-by", "-1",
                          "--dry-run", "--export")  # fmt: skip
    assert exported == f"{t},0,3\n{t},1,1\n"
    plan = parity.root / "from-kafkacoord.csv"
    plan.write_text(exported)
    kafka_groups_tool(bootstrap, "--group", ka, "--from-file", str(plan), "--execute")
    assert kafka_committed(bootstrap, ka, t) == {(t, 0): 3, (t, 1): 1}


def test_topics_create_if_not_exists_and_describe_configs(parity: Parity) -> None:
    run, name = parity.run, "kv"
    create = ("topics", "create", "--topic", name, "--replication-factor", "1")
    run(*create, "--partitions", "2")
    assert "already exists" in run(*create, "--partitions", "3", code=ExitCode.REFUSED)
    assert "already exists" in run(*create, "--partitions", "3", "--if-not-exists")
    [kv] = parity.answer("topics-describe", "topics", "describe", "-t", name)["topics"]
    assert kv["partition_count"] == 2

    run("topics", "alter-configs", "--topic", name, "--add-config",
        "unclean.leader.election.enable=true", "--add-config", "retention.ms=60000")  # fmt: skip
    described = parity.answer("topics-describe-configs", "topics", "describe", "-t", name,
                              "--configs")  # fmt: skip
    assert described == {"topic": name, "configs": [
        {"name": "min.insync.replicas", "value": "1", "default": "1",
         "source": "DEFAULT_CONFIG"},
        {"name": "retention.ms", "value": "60000", "default": None,
         "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "unclean.leader.election.enable", "value": "true", "default": "false",
         "source": "DYNAMIC_TOPIC_CONFIG"},
    ]}  # fmt: skip
    lines = run("topics", "describe", "-t", name, "--configs").splitlines()
    assert lines[0] == f"All configs for topic {name} are:"
    assert lines[2].split() == ["min.insync.replicas", "1", "DEFAULT_CONFIG", "1"]
    assert lines[3].split() == ["retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG", "-"]
    run("topics", "describe", "-t", "nope", "--configs", code=ExitCode.NOT_FOUND)


def test_a_reset_larger_than_one_request_lands_whole_in_chunks(parity: Parity) -> None:
    # 20,000 partitions encode to about 1.3 MB: more than the listener takes in one request.
    offsets = {(f"{parity.prefix}wide", p): p + 1 for p in range(20_000)}
    reported: list[int] = []
    with parity.admin() as admin:
        errors = admin.reset_offsets("wide-reset", offsets, on_progress=reported.append)
    assert set(errors.values()) == {ErrorCode.NONE}
    assert reported == [RESET_CHUNK_PARTITIONS] * (20_000 // RESET_CHUNK_PARTITIONS)
    assert parity.committed("wide-reset") == offsets


def test_a_reset_on_a_terminal_draws_its_progress_and_a_piped_one_does_not(
    parity: Parity,
) -> None:
    group = f"{parity.prefix}watched"
    parity.seed(group, {(parity.topic, 0): 1, (parity.topic, 1): 1})
    args = ["groups", "reset-offsets", "-g", group, "--topic", parity.topic, "--to-earliest"]
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kafkacoord", *args, "--execute"],
            env={**os.environ, **parity.env, "COLUMNS": "120"},
            stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, timeout=120,
        )  # fmt: skip
        os.close(follower)
        screen = b""
        while chunk := _read_pty(leader):
            screen += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"Resetting offsets" in screen and b"2/2" in screen
    piped = parity.run(*args, "--execute")
    assert "Resetting offsets" not in piped and "\x1b[" not in piped


def _read_pty(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the writer closed its end
        return b""


def test_a_request_over_the_frame_limit_is_refused_at_once_with_the_reason(
    parity: Parity, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One request of about 1.4 MB (18 bytes a partition in OffsetCommit's binary body):
    # the listener answers why and closes the connection; the client raises that answer
    # at once instead of retrying until its timeout.
    monkeypatch.setattr(group_admin, "RESET_CHUNK_PARTITIONS", 100_000)
    monkeypatch.setattr(group_admin, "RESET_CHUNK_BYTES", 100_000_000)
    offsets = {(f"{parity.prefix}huge", p): 1 for p in range(80_000)}
    with parity.admin() as admin:
        started = time.monotonic()
        with pytest.raises(RequestError) as refused:
            admin.reset_offsets("huge-reset", offsets)
        assert time.monotonic() - started < 10  # the call's own timeout is 30 s
        assert refused.value.code is ErrorCode.INVALID_REQUEST
        assert "exceeds max_frame_bytes=1048576" in str(refused.value)
        # The client serves on, on a new connection.
        assert admin.committed("huge-reset") == {}
