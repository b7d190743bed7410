"""``groups describe --as-of``: a classic group commits, an instant is noted, it commits
again, its topic grows and a second member joins; as of the noted instant the group
shows its first offsets, its one member then and the log ends then, as table and JSON."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.client import ClassicProtocolMember
from kafkacoord.client.instants import format_instant

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

SHARDS = 2


@pytest.fixture
def daemon(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**fast_daemon_env(bootstrap, prefix, SHARDS),
           "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}  # fmt: skip
    process: DaemonProcess = start_daemon(env, tmp_path, 1)
    try:
        process.wait_for("daemon ready", timeout_s=60)
        yield env
    finally:
        process.stop()


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def cli(env: dict[str, str], *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == code, result.output
    return result.output


def describe(env: dict[str, str], group: str, *args: str) -> dict[str, Any]:
    """``groups describe -o json``, validated against its published schema."""
    document = json.loads(cli(env, "groups", "describe", "-g", group, *args, "-o", "json"))
    text = resources.files("kafkacoord.cli").joinpath("schemas/groups-describe.json").read_text()
    Draft202012Validator(json.loads(text)).validate(document)
    return dict(document)


def test_describe_as_of_shows_the_offsets_members_and_ends_then(
    daemon: dict[str, str], bootstrap: str, prefix: str
) -> None:
    env = daemon
    topic, group = f"{prefix}events", f"{prefix}readers"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    produce(bootstrap, topic, {0: 10, 1: 5})  # batches of several records each

    def member() -> ClassicProtocolMember:
        return ClassicProtocolMember(
            bootstrap, group, [topic], topic_prefix=prefix, offsets_partitions=SHARDS,
            session_timeout_ms=6000, heartbeat_interval_ms=300,
        )  # fmt: skip

    first = member().start()
    second: ClassicProtocolMember | None = None
    try:
        assert first.wait_assigned(30)
        first.commit({(topic, 0): 3, (topic, 1): 1})
        time.sleep(0.3)
        noted = format_instant(int(time.time() * 1000))
        time.sleep(0.3)
        first.commit({(topic, 0): 8, (topic, 1): 4})
        produce(bootstrap, topic, {0: 5})
        second = member().start()
        assert second.wait_assigned(30)
        wait_until(lambda: len(describe(env, group)["members"]) == 2, timeout_s=20,
                   what="both members in the group")  # fmt: skip

        now = describe(env, group)
        then = describe(env, group, "--as-of", noted)
    finally:
        for m in (first, second):
            if m is not None:
                m.close()

    def offsets(document: dict[str, Any]) -> list[tuple[int, int, int, int]]:
        return [(o["partition"], o["current_offset"], o["log_end_offset"], o["lag"])
                for o in document["offsets"]]  # fmt: skip

    assert offsets(now) == [(0, 8, 15, 7), (1, 4, 5, 1)]
    assert offsets(then) == [(0, 3, 10, 7), (1, 1, 5, 4)]
    assert (then["group"], then["type"], then["state"]) == (group, "Classic", "Stable")
    assert then["coordinator_shard"] == now["coordinator_shard"]
    [alone] = then["members"]
    assert alone["member_id"] == first.member_id
    assert {(a["topic"], a["partition"]) for a in alone["assignment"]} == {(topic, 0), (topic, 1)}
    assert {o["consumer_id"] for o in then["offsets"]} == {first.member_id}

    table = cli(env, "groups", "describe", "-g", group, "--as-of", noted).splitlines()
    assert table[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG"]  # fmt: skip
    assert [row.split()[2:6] for row in table[1:]] == [["0", "3", "10", "7"], ["1", "1", "5", "4"]]
    members = cli(env, "groups", "describe", "-g", group, "--members", "--as-of", noted)
    assert len(members.splitlines()) == 2 and first.member_id in members

    # Before the group's first record it did not exist; a bad instant is a usage error.
    gone = cli(env, "groups", "describe", "-g", group, "--as-of", "-1h", code=3)
    assert "does not exist at" in gone
    cli(env, "groups", "describe", "-g", group, "--as-of", "yesterday", code=2)
