"""explain group on a real daemon and broker: a classic group of two members, one leaves,
the other goes, an admin resets an offset; explain group names the member that left and
the reset with who made it, and a restarted daemon loads the group past its audit
records."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from kafkacoord.cli.common import ExitCode
from kafkacoord.cli.main import app
from kafkacoord.client import GroupMember, group_member
from kafkacoord.client.admin import read_metadata
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration


class Daemon:
    """One daemon serving the one group shard; restartable on its data directory."""

    def __init__(self, bootstrap: str, prefix: str, root: Path) -> None:
        self.env = {**fast_daemon_env(bootstrap, prefix, 1),
                    "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}  # fmt: skip
        self.root = root
        self.process: DaemonProcess = start_daemon(self.env, root, 100)

    def restart(self) -> dict[str, object]:
        self.process.stop()
        self.process = start_daemon(self.env, self.root, 100)
        return self.process.wait_for("daemon ready")


@pytest.fixture
def daemon(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[Daemon]:
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    d = Daemon(bootstrap, prefix, tmp_path)
    try:
        image = lambda: read_metadata(bootstrap, topics.metadata)  # noqa: E731
        wait_until(lambda: (p := image().partition(topics.offsets, 0)) and p.leader >= 0,
                   what="the group shard placed")  # fmt: skip
        yield d
    finally:
        d.process.stop()


def test_explain_group_names_the_member_that_left_and_the_reset(
    daemon: Daemon, bootstrap: str, prefix: str
) -> None:
    topic, group = f"{prefix}orders", f"{prefix}billing"
    brokers = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer
    for future in brokers.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)

    def member(client_id: str) -> GroupMember:
        return group_member(bootstrap, group, [topic], protocol="classic", topic_prefix=prefix,
                            offsets_partitions=1, heartbeat_interval_ms=300,
                            rebalance_timeout_ms=5000, session_timeout_ms=6000,
                            client_id=client_id).start()  # fmt: skip

    running = [member("c1"), member("c2")]
    c1, c2 = running
    try:
        wait_until(lambda: c1.generation == c2.generation > 0 and c1.wait_assigned(0)
                   and c2.wait_assigned(0), timeout_s=20, what="two members stable")  # fmt: skip
        leaver, generation = c2.member_id, c2.generation
        running.pop().close()  # c2 leaves
        wait_until(lambda: c1.generation > generation and len(c1.assignment) == 2, timeout_s=20,
                   what="c1 alone in a new generation")  # fmt: skip
    finally:
        for m in running:
            m.close()

    env = {"KAFKACOORD_BOOTSTRAP": bootstrap, "KAFKACOORD_TOPIC_PREFIX": prefix,
           "KAFKACOORD_OFFSETS_PARTITIONS": "1"}  # fmt: skip

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == code, result.output
        return result.output

    wait_until(lambda: "Empty" in run("groups", "describe", "--group", group, "--state"),
               timeout_s=20, what="the group empty")  # fmt: skip
    run("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-offset", "0",
        "--execute")  # fmt: skip

    host = socket.gethostname()  # the members' client_host
    lines = run("explain", "group", "--group", group).splitlines()
    left = [line for line in lines if line.endswith(f"member {leaver} (client c2, {host}) left")]
    assert len(left) == 1 and "2 → 1 member: " in left[0], lines
    reset = lines[-1]
    # No client authentication on the test brokers' daemon: the request names the client.
    assert "offsets reset by client " in reset and "(no principal: unauthenticated)" in reset
    assert reset.endswith(f"{topic}-0 none → 0"), lines

    answer = json.loads(run("explain", "group", "--group", group, "--json"))
    assert answer["group"] == group
    [step] = [s for s in answer["steps"] if (s["cause"] or {}).get("kind") == "member_left"
              and s["cause"]["member_id"] == leaver]  # fmt: skip
    assert step["cause"]["client_id"] == "c2" and step["cause"]["client_host"] == host
    assert step["members"][1] == 1 and step["protocol"] == "classic"
    admin = answer["steps"][-1]["admin"]
    assert admin["action"] == "offsets_reset" and admin["principal"] is None
    assert admin["offsets"] == [{"topic": topic, "partition": 0, "before": None, "after": 0}]
    assert run("explain", "group", "--group", f"{prefix}nobody", code=ExitCode.NOT_FOUND)

    # The audit records are history only: a restarted daemon loads the group and its
    # offsets as they were, and refuses no record.
    assert daemon.restart()["poison_skipped"] == 0
    assert "Empty" in run("groups", "describe", "--group", group, "--state")
    rows = [line.split() for line in run("groups", "describe", "--group", group).splitlines()[1:]]
    assert [r[1:4] for r in rows if r[2] == "0"] == [[topic, "0", "0"]]
