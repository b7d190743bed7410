"""``--output json`` of every state command, validated against its published schema, and
the exit codes scripts branch on: ``python -m kafkacoord`` against a daemon on the real
broker, with service nodes and a classic group of its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from jsonschema import Draft202012Validator

from kafkacoord.cli.common import ExitCode
from kafkacoord.client import ClassicProtocolMember
from kafkacoord.client.admin import read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.consumer_member import ConsumerProtocolMember
from kafkacoord.storage.topics import InternalTopics

from .cluster import DaemonProcess, Replicas, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

DAEMON = 7
NODES = (1, 2, 3)
SHARDS = 2
EVENTS = {0: 10, 1: 5}  # records produced per partition of the group's topic


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkacoord", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def run(env: dict[str, str], *args: str, code: int = ExitCode.OK) -> str:
    done = cli(env, *args)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr[-2000:])
    return done.stdout


def answer(env: dict[str, str], schema: str, *args: str, code: int = ExitCode.OK) -> Any:
    """The command's ``--output json`` answer, validated against ``schemas/<schema>.json``."""
    document = json.loads(run(env, *args, "--output", "json", code=code))
    text = resources.files("kafkacoord.cli").joinpath(f"schemas/{schema}.json").read_text()
    Draft202012Validator(json.loads(text)).validate(document)
    return document


@pytest.fixture
def env(bootstrap: str, prefix: str) -> dict[str, str]:
    return {
        **fast_daemon_env(bootstrap, prefix, SHARDS),
        "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
        "KAFKACOORD_AUTO_LEADER_REBALANCE_ENABLE": "false",
    }


@pytest.fixture
def daemon(env: dict[str, str], bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[None]:
    process: DaemonProcess = start_daemon(env, tmp_path, DAEMON)
    agents: list[NodeAgent] = []
    try:
        process.wait_for("daemon ready", timeout_s=120)
        for node in NODES:
            agent = NodeAgent(bootstrap, node_id=node, handler=Replicas(), topic_prefix=prefix,
                              heartbeat_interval_ms=500)  # fmt: skip
            agents.append(agent.start(timeout_s=120))
        metadata = InternalTopics(prefix=prefix).metadata
        wait_until(
            lambda: (image := read_metadata(bootstrap, metadata)).controller is not None
            and set(image.live_nodes()) >= {DAEMON, *NODES},
            timeout_s=120, what="a controller and every node live",
        )  # fmt: skip
        yield
    finally:
        for agent in agents:
            agent.close()
        process.stop()


def _group_topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, len(EVENTS), 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in EVENTS.items():
        for i in range(count):
            producer.produce(name, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    return name


def test_every_state_command_answers_json_matching_its_schema(
    daemon: None, env: dict[str, str], bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    run(env, "topics", "create", "--topic", "orders", "--partitions", "2",
        "--replication-factor", "2")  # fmt: skip

    assert "orders" in answer(env, "topics-list", "topics", "list")["topics"]
    assert "orders" in run(env, "topics", "list").split()  # the table stays the default

    [orders] = answer(env, "topics-describe", "topics", "describe", "-t", "orders")["topics"]
    assert (orders["name"], orders["partition_count"], orders["replication_factor"]) == (
        "orders", 2, 2)  # fmt: skip
    assert [p["partition"] for p in orders["partitions"]] == [0, 1]
    for p in orders["partitions"]:
        assert len(p["replicas"]) == 2 and set(p["replicas"]) <= set(NODES)
        assert p["leader"] in p["replicas"] and p["adding_replicas"] == []
    filtered = answer(env, "topics-describe", "topics", "describe", "-t", "orders",
                      "--unavailable-partitions")  # fmt: skip
    assert filtered == {"topics": []}

    nodes = {n["id"]: n for n in answer(env, "nodes-list", "nodes", "list")["nodes"]}
    assert set(nodes) == {DAEMON, *NODES}
    assert {n["state"] for n in nodes.values()} == {"UNFENCED"}
    assert "coordinator" in nodes[DAEMON]["roles"]
    assert sum(nodes[n]["replicas"] for n in NODES) == 4
    assert sum(nodes[n]["leaders"] for n in NODES) == 2
    assert run(env, "nodes", "list").splitlines()[0].split()[:3] == ["ID", "RACK", "STATE"]

    # Preferred leaders lead already (no auto rebalance to undo): nothing to elect.
    elected = answer(env, "elect-leaders", "elect-leaders", "--election-type", "preferred",
                     "--topic", "orders", "--partition", "0")  # fmt: skip
    assert elected["election_type"] == "preferred"
    assert [(p["partition"], p["outcome"], p["error"]) for p in elected["partitions"]] == [
        (0, "not_needed", "ELECTION_NOT_NEEDED")]  # fmt: skip
    failed = answer(env, "elect-leaders", "elect-leaders", "--election-type", "preferred",
                    "--topic", "orders", "--partition", "7", code=ExitCode.FAILED)  # fmt: skip
    assert [(p["partition"], p["outcome"], p["error"]) for p in failed["partitions"]] == [
        (7, "failed", "UNKNOWN_TOPIC_OR_PARTITION")]  # fmt: skip

    # Verify a file against the placement as it is: orders-0 as placed (completed), orders-1
    # elsewhere (mismatch), orders-9 (missing); not all complete, so exit 1.
    first, second = orders["partitions"]
    elsewhere = [n for n in NODES if n not in second["replicas"]] + second["replicas"][:1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": first["replicas"]},
        {"topic": "orders", "partition": 1, "replicas": elsewhere},
        {"topic": "orders", "partition": 9, "replicas": [1]},
    ]}))  # fmt: skip
    verified = answer(env, "reassign-verify", "reassign", "verify", "--reassignment-json-file",
                      str(plan), code=ExitCode.FAILED)  # fmt: skip
    assert verified["complete"] is False
    assert [(p["partition"], p["status"], p["replicas"]) for p in verified["partitions"]] == [
        (0, "completed", first["replicas"]), (1, "mismatch", second["replicas"]),
        (9, "missing", None)]  # fmt: skip

    # Move orders-1 to the node that does not hold it: listed while in flight.
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 1, "replicas": elsewhere}]}))  # fmt: skip
    run(env, "reassign", "execute", "--reassignment-json-file", str(move))
    for moving in answer(env, "reassign-list", "reassign", "list")["reassignments"]:
        assert (moving["topic"], moving["partition"], moving["target_replicas"]) == (
            "orders", 1, elsewhere)  # fmt: skip

    topic = _group_topic(bootstrap, f"{prefix}events")
    group = f"{prefix}readers"
    member = ClassicProtocolMember(
        bootstrap, group, [topic], topic_prefix=prefix, offsets_partitions=SHARDS,
        session_timeout_ms=6000, heartbeat_interval_ms=500,
    ).start()  # fmt: skip
    try:
        assert member.wait_assigned(60)
        member.commit({(topic, 0): 7, (topic, 1): 5})
        listed = answer(env, "groups-list", "groups", "list")["groups"]
        assert {"group_id": group, "type": "Classic", "state": "Stable"} in listed
        described = answer(env, "groups-describe", "groups", "describe", "-g", group)
        assert (described["group"], described["type"], described["state"]) == (
            group, "Classic", "Stable")  # fmt: skip
        [joined] = described["members"]
        assert {(a["topic"], a["partition"]) for a in joined["assignment"]} == {
            (topic, 0), (topic, 1)}  # fmt: skip
        offsets = {o["partition"]: o for o in described["offsets"]}
        assert [(offsets[p]["current_offset"], offsets[p]["log_end_offset"], offsets[p]["lag"])
                for p in (0, 1)] == [(7, 10, 3), (5, 5, 0)]  # fmt: skip
        assert {o["consumer_id"] for o in offsets.values()} == {joined["member_id"]}

        summary = answer(env, "status", "status")
        assert summary["controller"]["node_id"] == DAEMON
        assert summary["groups"]["total_lag"] == 3
        assert json.loads(run(env, "status", "--json"))["groups"]["total_lag"] == 3
    finally:
        member.close()

    # A KIP-848 group: its epochs, and each member's epoch, state and target.
    kip848 = f"{prefix}kip848"
    consumer = ConsumerProtocolMember(bootstrap, kip848, [topic], topic_prefix=prefix,
                                      offsets_partitions=SHARDS).start()  # fmt: skip
    try:
        assert consumer.wait_assigned(60)
        consumer.commit({(topic, 1): 2})

        def reconciled() -> dict[str, Any] | None:
            found = answer(env, "groups-describe", "groups", "describe", "-g", kip848)
            members = found["members"]
            whole = len(members) == 1 and len(members[0]["assignment"]) == len(EVENTS)
            return found if whole and found["offsets"] else None

        described = wait_until(reconciled, timeout_s=60, what="the member holds everything")
        assert (described["type"], described["state"]) == ("Consumer", "Stable")
        assert described["group_epoch"] >= 1 and described["assignment_epoch"] >= 1
        [joined] = described["members"]
        assert joined["member_epoch"] >= 1 and joined["member_state"] == "STABLE"
        assert sorted(joined["target_assignment"], key=lambda a: a["partition"]) == [
            {"topic": topic, "partition": p} for p in sorted(EVENTS)]  # fmt: skip
        [committed] = [o for o in described["offsets"] if o["current_offset"] is not None]
        assert (committed["partition"], committed["lag"]) == (1, 5 - 2)
    finally:
        consumer.close()

    planned = answer(env, "rebalance-plan", "rebalance", "plan")
    assert planned == json.loads(run(env, "rebalance", "plan", "--json"))
    assert {n["node"] for n in planned["nodes"]} == {DAEMON, *NODES}
    assert answer(env, "rebalance-status", "rebalance", "status") is None


def test_exit_codes_say_what_went_wrong(daemon: None, env: dict[str, str]) -> None:
    run(env, "topics", "create", "--topic", "orders", "--partitions", "1")
    missing = run(env, "topics", "describe", "--topic", "nope", code=ExitCode.NOT_FOUND)
    assert missing == ""
    run(env, "topics", "delete", "--topic", "nope", code=ExitCode.NOT_FOUND)
    run(env, "groups", "describe", "--group", "nope", "-o", "json", code=ExitCode.NOT_FOUND)
    run(env, "topics", "create", "--topic", "orders", "--partitions", "1",
        code=ExitCode.REFUSED)  # fmt: skip
    run(env, "topics", "create", "--topic", "big", "--partitions", "1",
        "--replication-factor", "7", code=ExitCode.REFUSED)  # fmt: skip
    run(env, "elect-leaders", "--election-type", "fastest", "--all-topic-partitions",
        code=ExitCode.USAGE)  # fmt: skip
    run(env, "topics", "list", "--output", "yaml", code=ExitCode.USAGE)


def test_no_daemon_is_unreachable(bootstrap: str, prefix: str) -> None:
    # The broker answers, but no daemon does: the request times out, after the
    # request_timeout_ms asked for rather than the default 30 s.
    env = {"KAFKACOORD_BOOTSTRAP": bootstrap, "KAFKACOORD_TOPIC_PREFIX": prefix,
           "KAFKACOORD_REQUEST_TIMEOUT_MS": "3000"}  # fmt: skip
    started = time.monotonic()
    done = cli(env, "topics", "create", "--topic", "orders", "--partitions", "1")
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr[-2000:]
    assert time.monotonic() - started < 25, "it waited the default 30 s, not 3"
    done = cli(env, "groups", "describe", "--group", "g")
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr[-2000:]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_broker_is_unreachable(tmp_path: Path) -> None:
    # Neither a bootstrap nor a local daemon's: nothing to reach.
    alone = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOORD_")}
    done = subprocess.run(
        [sys.executable, "-m", "kafkacoord", "topics", "list"],
        env={**alone, "KAFKACOORD_DATA_DIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr
    assert "no broker" in done.stderr
    # A bootstrap nobody listens on: the read times out.
    down = f"127.0.0.1:{_closed_port()}"
    done = cli({}, "status", "--timeout", "2", "--bootstrap-server", down)
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr[-2000:]
    assert "within 2s" in done.stderr
