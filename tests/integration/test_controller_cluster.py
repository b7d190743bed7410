"""Three daemons and six service nodes on the real broker: failover, fencing, movement."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.codecs import encode_record
from kafkacoord.codecs.models import PartitionKey, PartitionState, PartitionValue
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import DaemonProcess, Replicas, fast_daemon_env, start_daemon, wait_until
from .helpers import append_all

pytestmark = pytest.mark.integration

DAEMONS = (100, 101, 102)
NODES = (1, 2, 3, 4, 5, 6)


class Cluster:
    def __init__(self, bootstrap: str, prefix: str, root: Path) -> None:
        self.bootstrap = bootstrap
        self.topics = InternalTopics(prefix=prefix, offsets_partitions=2)
        ensure_topics(admin_client(bootstrap), self.topics.specs(), replication_factor=1)
        self.env = {
            **fast_daemon_env(bootstrap, prefix, 2),
            "KAFKACOORD_AUTO_LEADER_REBALANCE_ENABLE": "false",
        }
        self.root = root
        self.daemons: dict[int, DaemonProcess] = {}
        self.replicas: dict[int, Replicas] = {}
        self.agents: dict[int, NodeAgent] = {}
        self.admin = ControllerAdmin(bootstrap, self.topics, timeout_s=60)

    def start_daemon(self, node: int) -> DaemonProcess:
        self.daemons[node] = daemon = start_daemon(self.env, self.root, node)
        return daemon

    def start_node(self, node: int) -> None:
        replicas = Replicas()
        agent = NodeAgent(self.bootstrap, node_id=node, handler=replicas,
                          topic_prefix=self.topics.prefix, heartbeat_interval_ms=500)  # fmt: skip
        replicas.agent = agent
        self.replicas[node] = replicas
        self.agents[node] = agent.start(timeout_s=60)

    def image(self):  # type: ignore[no-untyped-def]
        return read_metadata(self.bootstrap, self.topics.metadata)

    def active_controller(self) -> int | None:
        image = self.image()
        return None if image.controller is None else image.controller.node_id

    def close(self) -> None:
        self.admin.close()
        for agent in self.agents.values():
            agent.close()
        for daemon in self.daemons.values():
            daemon.stop()


@pytest.fixture
def cluster(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(bootstrap, prefix, tmp_path)
    try:
        for node in DAEMONS:
            c.start_daemon(node)
        for node in NODES:
            c.start_node(node)
        wait_until(lambda: len(c.image().live_nodes()) >= len(DAEMONS) + len(NODES),
                   what="every node registered and unfenced")  # fmt: skip
        yield c
    finally:
        c.close()


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    return {v.partition: v.leader for v in cluster.image().partitions_of(topic)}


def test_controller_failover_node_loss_shutdown_and_reassignment(cluster: Cluster) -> None:
    admin = cluster.admin
    created = admin.create_topic("orders", replica_assignment={
        p: [NODES[p % 6], NODES[(p + 1) % 6], NODES[(p + 2) % 6]] for p in range(6)})  # fmt: skip
    assert created.assignment[0] == [1, 2, 3]
    wait_until(lambda: all(r.leading() for r in cluster.replicas.values()),
               what="every node leads one partition")  # fmt: skip

    # Kill the active controller: another daemon takes over with a higher epoch.
    image = cluster.image()
    assert image.controller is not None
    first, epoch = image.controller.node_id, image.controller.epoch
    cluster.daemons[first].kill()
    new = wait_until(
        lambda: (c := cluster.image().controller) and c.epoch > epoch and c.node_id != first and c,
        timeout_s=30, what="a new controller",
    )  # fmt: skip
    assert new.node_id in DAEMONS

    # Kill node 1 (it leads orders-0): leadership moves to an ISR member.
    cluster.agents.pop(1).close()
    wait_until(lambda: _leaders(cluster, "orders")[0] in (2, 3), what="orders-0 re-elected")
    fenced = cluster.image().node(1)
    assert fenced is not None and fenced.fenced
    assert all(1 not in v.isr or v.isr == (1,) for v in cluster.image().partitions_of("orders"))

    # Controlled shutdown of node 4 leaves it with no leaderships.
    remaining = cluster.agents[4].controlled_shutdown()
    assert remaining == []
    assert 4 not in _leaders(cluster, "orders").values()

    # Reassign orders-2 ({3,4,5}) to {5,6,2}, and fail the controller over mid-flight.
    results = admin.alter_reassignments({("orders", 2): [5, 6, 2]})
    assert [r.error.name for r in results] == ["NONE"]
    current = cluster.active_controller()
    assert current is not None
    cluster.daemons[current].kill()
    done = wait_until(
        lambda: (v := cluster.image().partition("orders", 2)) and v.reassignment is None
        and v.replicas == (5, 6, 2) and v,
        timeout_s=60, what="reassignment completed",
    )  # fmt: skip
    assert done.leader in (5, 6, 2)
    assert set(done.isr) <= {5, 6, 2}


def test_a_late_write_of_an_old_controller_is_ignored(cluster: Cluster) -> None:
    cluster.admin.create_topic("late", replica_assignment={0: [1, 2]})
    before = wait_until(lambda: cluster.image().partition("late", 0), what="late-0")
    image = cluster.image()
    assert image.controller is not None and image.controller.epoch >= 0
    stale = PartitionValue(
        "late", 0, PartitionState.ONLINE, (1, 2), (1, 2), 2, before.leader_epoch + 5,
        before.partition_epoch + 5, 0, image.controller.epoch - 1,
    )  # fmt: skip
    key, value = encode_record(PartitionKey("late", 0), stale)
    append_all(cluster.bootstrap, cluster.topics.metadata, [(0, key, value)])
    after = cluster.image()
    assert after.partition("late", 0) == before
    assert after.ignored_stale >= 1
    # Node 2 follows the log too and must not act on it.
    assert ("late", 0) not in cluster.replicas[2].leading()
    # And a controller failover (which reloads from the log) still ignores it.
    current = cluster.active_controller()
    assert current is not None
    cluster.daemons[current].kill()
    wait_until(lambda: cluster.active_controller() not in (None, current), timeout_s=30,
               what="failover")  # fmt: skip
    assert cluster.image().partition("late", 0).leader == before.leader  # type: ignore[union-attr]


def cli(cluster: Cluster) -> tuple[CliRunner, dict[str, str], Callable[..., str]]:
    """The CLI against the cluster: the runner, its environment, and ``run(*args, code=0)``."""
    runner = CliRunner()
    env = {"KAFKACOORD_BOOTSTRAP": cluster.bootstrap,
           "KAFKACOORD_TOPIC_PREFIX": cluster.topics.prefix}  # fmt: skip

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args), env=env)
        assert result.exit_code == code, result.output
        return result.output

    return runner, env, run


def test_admin_commands_end_to_end(cluster: Cluster, tmp_path: Path) -> None:
    runner, env, run = cli(cluster)

    out = run("topics", "create", "--topic", "cli", "--partitions", "3",
              "--replication-factor", "2")  # fmt: skip
    assert "Created topic cli." in out
    assert "larger than the 6 live service nodes" in run(
        "topics",
        "create",
        "--topic",
        "big",
        "--partitions",
        "1",
        "--replication-factor",
        "7",
        code=4,  # refused: INVALID_REPLICATION_FACTOR
    )
    assert "cli" in run("topics", "list").split()
    described = run("topics", "describe", "--topic", "cli")
    assert described.startswith("Topic: cli\t")
    assert described.count("\tTopic: cli\tPartition: ") == 3
    assert run("topics", "describe", "--topic", "cli", "--under-replicated-partitions") == ""
    # The group shards grew to two replicas each once a second daemon caught up.
    wait_until(
        lambda: (
            runner.invoke(
                app, ["topics", "describe", "--under-replicated-partitions"], env=env
            ).output
            == ""
        ),
        what="no under-replicated partitions",
    )
    nodes = run("nodes", "list")
    assert nodes.splitlines()[0].split()[:3] == ["ID", "RACK", "STATE"]
    assert sum(" UNFENCED " in line for line in nodes.splitlines()) == 9

    # Move cli-0 onto nodes 5 and 6 with kafka-reassign-partitions' files.
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"cli","partition":0,"replicas":[5,6]}]}')
    # --wait follows it to the end; piped, a line per change and no bar.
    out = run("reassign", "execute", "--reassignment-json-file", str(plan), "--wait")
    assert "Successfully started partition reassignment" in out
    assert out.splitlines()[-1] == "Reassignment: 1/1 partitions completed, 0 in progress"
    assert "\x1b" not in out
    assert "is completed" in run("reassign", "verify", "--reassignment-json-file", str(plan))
    assert "No partition reassignments in progress." in run("reassign", "list")
    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"version":1,"topics":[{"topic":"cli"}]}')
    proposal = run("reassign", "generate", "--topics-to-move-json-file", str(topics_file),
                   "--broker-list", "1,2,3")  # fmt: skip
    assert "Proposed partition reassignment configuration" in proposal

    out = run("elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert any(
        m in out
        for m in ("Successfully completed", "Valid replica already elected", "No partition needed")
    )
    assert "--topic needs --partition" in run(
        "elect-leaders", "--election-type", "preferred", "--topic", "cli", code=2
    )
    out = run("shutdown-node", "6")
    assert "leads no partitions" in out
    assert 6 not in _leaders(cluster, "cli").values()
    assert "is marked for deletion" in run("topics", "delete", "--topic", "cli")
    wait_until(lambda: cluster.image().topic("cli") is None, what="topic deleted")


def test_rebalance_commands_end_to_end(cluster: Cluster) -> None:
    import json

    _, _, run = cli(cluster)

    # Nodes 5 and 6 hold nothing: the plan fills them.
    cluster.admin.create_topic("skewed", replica_assignment={p: [1 + p % 4, 1 + (p + 1) % 4]
                                                             for p in range(12)})  # fmt: skip
    out = run("topics", "alter-configs", "--topic", "skewed", "--add-config",
              "min.insync.replicas=2")  # fmt: skip
    assert "Configs for topic skewed are now: min.insync.replicas=2" in out
    assert "must be an integer" in run("topics", "alter-configs", "--topic", "skewed",
                                       "--add-config", "min.insync.replicas=x", code=4)  # fmt: skip
    assert "no rebalance has run" in run("rebalance", "status", code=1)
    planned = json.loads(run("rebalance", "plan", "--json"))
    by_node = {n["node"]: n for n in planned["nodes"]}
    assert by_node[5]["replicas_before"] == 0 and by_node[5]["replicas_after"] >= 3
    assert planned["replica_moves"] >= planned["replica_moves_lower_bound"] > 0
    daemons = set(DAEMONS)
    for move in planned["moves"]:  # daemons hold the group shards, never user replicas
        assert (move["topic"] == "skewed") == daemons.isdisjoint(move["to"]), move
    assert cluster.image().rebalance is None  # a plan is a dry run
    assert "REPLICAS" in run("rebalance")  # the default command is the plan

    out = run("rebalance", "execute", "--max-concurrent-moves-per-node", "2", "--wait")
    assert "COMPLETED" in out and "[####" in out and "\x1b" not in out
    status = json.loads(run("rebalance", "status", "--json"))
    assert status["state"] == "COMPLETED" and status["done"] == status["moves"] > 0
    counts = [sum(n in v.replicas for v in cluster.image().partitions_of("skewed"))
              for n in NODES]  # fmt: skip
    assert max(counts) - min(counts) <= 1, counts
    assert "no rebalance is running" in run("rebalance", "stop", code=1)

    # Leadership away from node 1 (no data moves), then drain node 6.
    run("nodes", "demote", "1", "--wait")
    image = cluster.image()
    assert all(v.replicas[0] != 1 for v in image.partitions_of("skewed"))
    assert all(v.leader != 1 for v in image.partitions_of("skewed"))
    run("nodes", "remove", "6", "--wait")
    assert all(6 not in v.replicas for v in cluster.image().partitions_of("skewed"))
    assert "not registered and live" in run("nodes", "add", "42", code=1)
