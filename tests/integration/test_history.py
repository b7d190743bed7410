"""History, as a new user tries it: a topic on three nodes, its leader killed; then
``explain partition`` names the cause, and ``--as-of`` shows the cluster before. And the
state ``--as-of`` reports at sampled instants is the controller's state at each."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kafkacoord.cli.documents import node_list, topic_descriptions
from kafkacoord.cli.main import app
from kafkacoord.cli.render import PartitionFilter, select_partitions
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.instants import format_instant
from kafkacoord.client.metadata_history import metadata_as_of
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.log_history import read_log
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import DaemonProcess, Replicas, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)


def documents(image: MetadataImage) -> dict[str, Any]:
    """What topics describe and nodes list print as JSON."""
    topics = topic_descriptions(select_partitions(image, None, PartitionFilter()), False)
    return {**topics, **node_list(image)}


class Lab:
    def __init__(self, bootstrap: str, prefix: str, root: Path, window_ms: int) -> None:
        self.bootstrap = bootstrap
        self.topics = InternalTopics(
            prefix=prefix, offsets_partitions=1, history_window_ms=window_ms
        )
        ensure_topics(admin_client(bootstrap), self.topics.specs(), replication_factor=1)
        env = {**fast_daemon_env(bootstrap, prefix, 1),
               "KAFKACOORD_AUTO_LEADER_REBALANCE_ENABLE": "false"}  # fmt: skip
        self.daemon: DaemonProcess = start_daemon(env, root, 100)
        self.agents: dict[int, NodeAgent] = {}
        self.admin = ControllerAdmin(bootstrap, self.topics, timeout_s=60)
        self.env = {"KAFKACOORD_BOOTSTRAP": bootstrap, "KAFKACOORD_TOPIC_PREFIX": prefix}
        self.samples: list[tuple[int, dict[str, Any]]] = []

    def start_node(self, node: int) -> None:
        replicas = Replicas()
        agent = NodeAgent(self.bootstrap, node_id=node, handler=replicas,
                          topic_prefix=self.topics.prefix, heartbeat_interval_ms=500)  # fmt: skip
        replicas.agent = agent
        self.agents[node] = agent.start(timeout_s=60)

    def image(self) -> MetadataImage:
        return read_metadata(self.bootstrap, self.topics.metadata)

    def sample(self) -> None:
        """The controller's state and an instant it held at: the same state read before
        and after the instant."""
        for _ in range(20):
            before = documents(self.image())
            time.sleep(0.05)
            instant = int(time.time() * 1000)
            time.sleep(0.05)
            if documents(self.image()) == before:
                self.samples.append((instant, before))
                return
        raise AssertionError("the metadata never held still")

    def cli(self, *args: str) -> str:
        result = CliRunner().invoke(app, list(args), env=self.env)
        assert result.exit_code == 0, result.output
        return own_output(result)

    def close(self) -> None:
        self.admin.close()
        for agent in self.agents.values():
            agent.close()
        self.daemon.stop()


# The lab's node agents log from their own threads into whatever stdout is at the
# time, so a CLI run in this process captures their lines too (a lease granted, a
# log end not read in time on a loaded machine). The CLI's own output is the rest.
AGENT_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[\w+\s*\] ")


def own_output(result: Result) -> str:
    return "".join(
        line for line in result.output.splitlines(keepends=True) if not AGENT_LOG_LINE.match(line)
    )


@pytest.fixture
def lab(
    bootstrap: str, prefix: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Lab]:
    # The internal topics' min.compaction.lag.ms: a test's own (indirect), else a day.
    lab = Lab(bootstrap, prefix, tmp_path, getattr(request, "param", 86_400_000))
    try:
        for node in NODES:
            lab.start_node(node)
        wait_until(lambda: NODES[-1] in lab.image().live_nodes(), what="the nodes registered")
        yield lab
    finally:
        lab.close()


def leader(lab: Lab, topic: str, partition: int = 0) -> Callable[[], int | None]:
    def check() -> int | None:
        state = lab.image().partition(topic, partition)
        return None if state is None else state.leader

    return check


def test_explain_names_the_expired_session_and_as_of_shows_the_leader_before(lab: Lab) -> None:
    lab.admin.create_topic("orders", replica_assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    wait_until(lambda: leader(lab, "orders")() == 1, what="orders-0 led by node 1")
    lab.sample()
    before_kill = lab.samples[-1][0]

    lab.agents.pop(1).close()  # no controlled shutdown: its session expires
    new = wait_until(lambda: (n := leader(lab, "orders")()) in (2, 3) and n, timeout_s=30,
                     what="orders-0 failed over")  # fmt: skip
    wait_until(lambda: 1 not in lab.image().live_nodes(), what="node 1 fenced")
    lab.sample()
    lab.admin.create_topic("payments", replica_assignment={0: [3, 2]})
    lab.sample()
    lab.admin.alter_reassignments({("payments", 0): [2, 3]})
    wait_until(lambda: lab.image().partition("payments", 0).replicas == (2, 3),  # type: ignore[union-attr]
               what="payments-0 reordered")  # fmt: skip
    lab.sample()
    lab.admin.elect_leaders("preferred", [("payments", 0)])
    wait_until(lambda: leader(lab, "payments")() == 2, what="payments-0 led by node 2")
    lab.sample()
    lab.admin.create_partitions("payments", 2)
    wait_until(lambda: lab.image().partition("payments", 1), what="payments-1 created")
    lab.sample()

    lines = lab.cli("explain", "partition", "--topic", "orders", "--partition", "0").splitlines()
    failover = next(line for line in lines if f"leader 1 → {new}" in line)
    assert "node 1's session expired (last heartbeat " in failover, lines
    assert "chosen from the ISR" in failover and "ISR [1,2,3] → [" in failover
    assert "created on replicas [1,2,3], leader 1: the topic was created" in lines[0]

    answer = json.loads(lab.cli("explain", "partition", "-t", "orders", "-p", "0", "--json"))
    assert (answer["topic"], answer["partition"]) == ("orders", 0)
    moved = next(s for s in answer["decisions"] if s["changes"].get("leader") == [1, new])
    assert moved["trigger"]["kind"] == "session_expired" and moved["trigger"]["node_id"] == 1
    assert moved["trigger"]["heartbeat_ms"] <= moved["time_ms"]
    assert moved["rule"] == "offline" and moved["text"] == failover

    then = format_instant(before_kill)
    described = lab.cli("topics", "describe", "--topic", "orders", "--as-of", then)
    assert "Partition: 0\tLeader: 1\t" in described, described
    assert "payments" not in lab.cli("topics", "describe", "--as-of", then)
    doc = json.loads(lab.cli("topics", "describe", "-t", "orders", "--as-of", then, "-o", "json"))
    assert doc["topics"][0]["partitions"][0]["leader"] == 1
    nodes = json.loads(lab.cli("nodes", "list", "--as-of", then, "-o", "json"))
    assert {n["id"]: n["state"] for n in nodes["nodes"]}[1] != "fenced"

    # Replayed from the log, each sampled instant gives the controller's state then.
    now = int(time.time() * 1000)
    assert len(lab.samples) == 6
    for instant, expected in lab.samples:
        assert documents(metadata_as_of(lab.bootstrap, lab.topics, instant, now)) == expected
    # And the whole log record by record: as of each record's time, the state is the
    # replay of every record up to the last one stamped then (eight times spread out).
    log = read_log(lab.bootstrap, lab.topics.metadata).records
    image, after = MetadataImage(), {}
    for logged in log:
        image.replay(Record(logged.key, logged.value))
        after[logged.timestamp_ms] = documents(image)
    times = sorted(after)
    for at in times[:: max(1, len(times) // 8)]:
        assert documents(metadata_as_of(lab.bootstrap, lab.topics, at, now)) == after[at], at


@pytest.mark.parametrize("lab", [1000], indirect=True)
def test_an_instant_older_than_the_window_says_where_history_ends(lab: Lab) -> None:
    lab.admin.create_topic("orders", replica_assignment={0: [1, 2]})
    short = lab.env  # the topics were created with a 1 s window
    result = CliRunner().invoke(app, ["topics", "describe", "--as-of", "2020-01-01T00:00:00Z"],
                                env=short)  # fmt: skip
    assert result.exit_code == 0, result.output  # before offset 0: nothing existed
    assert own_output(result).strip() == ""
    time.sleep(1.5)  # the first record is now older than the 1 s window
    inside = CliRunner().invoke(app, ["topics", "describe", "--as-of", "-1s"], env=short)
    assert inside.exit_code == 0 and "orders" in inside.output, inside.output
    first = read_log(lab.bootstrap, lab.topics.metadata).first_timestamp_ms
    assert first is not None
    after_first = format_instant(first + 1)
    old = CliRunner().invoke(app, ["topics", "describe", "--as-of", after_first], env=short)
    assert old.exit_code == 3, old.output
    assert "history in the log is exact from" in old.output and "--warehouse" in old.output
    bad = CliRunner().invoke(app, ["nodes", "list", "--as-of", "yesterday"], env=lab.env)
    assert bad.exit_code == 2 and "not an instant" in bad.output
