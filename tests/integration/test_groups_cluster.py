"""Consumer groups on three daemons: a 20-member group, shard failover, reload, static members."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.client import GroupAdmin, GroupMember, group_member
from kafkacoord.client.admin import read_metadata
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

DAEMONS = (100, 101, 102)
SHARDS = 3


class GroupCluster:
    def __init__(self, bootstrap: str, prefix: str, root: Path) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
        ensure_topics(admin_client(bootstrap), self.topics.specs(), replication_factor=1)
        self.root = root
        self.env = {
            **fast_daemon_env(bootstrap, prefix, SHARDS),
            "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",
        }
        self.daemons: dict[int, DaemonProcess] = {}
        self.members: list[GroupMember] = []

    def start_daemon(self, node: int) -> DaemonProcess:
        self.daemons[node] = daemon = start_daemon(self.env, self.root, node)
        return daemon

    def shard_leader(self, shard: int) -> int | None:
        image = read_metadata(self.bootstrap, self.topics.metadata)
        value = image.partition(self.topics.offsets, shard)
        return None if value is None or value.leader < 0 else value.leader

    def member(
        self, group: str, topic: str, *, protocol: str = "classic", **kwargs: object
    ) -> GroupMember:
        if protocol == "classic":  # a consumer-protocol group's session is the group's
            kwargs.setdefault("session_timeout_ms", 6000)
        m = group_member(
            self.bootstrap, group, [topic], protocol=protocol, topic_prefix=self.prefix,
            offsets_partitions=SHARDS, heartbeat_interval_ms=500, rebalance_timeout_ms=15000,
            **kwargs,
        )  # fmt: skip
        self.members.append(m)
        return m

    def close(self) -> None:
        for m in self.members:
            m.close()
        for daemon in self.daemons.values():
            daemon.stop()


@pytest.fixture
def groups(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[GroupCluster]:
    c = GroupCluster(bootstrap, prefix, tmp_path)
    try:
        for node in DAEMONS:
            c.start_daemon(node)
        wait_until(lambda: all(c.shard_leader(s) is not None for s in range(SHARDS)),
                   what="every group shard placed")  # fmt: skip
        yield c
    finally:
        c.close()


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def _stable(members: list[GroupMember]) -> bool:
    generations = {m.generation for m in members}
    return len(generations) == 1 and all(m.wait_assigned(0) for m in members)


def test_twenty_members_share_every_partition_and_survive_shard_failover(
    groups: GroupCluster, prefix: str
) -> None:
    topic = _topic(groups.bootstrap, f"{prefix}events", 40)
    group = f"{prefix}billing"
    members = [groups.member(group, topic).start() for _ in range(20)]
    wait_until(lambda: _stable(members), timeout_s=90, what="20 members stable")
    owned = Counter(tp for m in members for tp in m.assignment)
    assert set(owned) == {(topic, p) for p in range(40)}
    assert set(owned.values()) == {1}
    assert all(len(m.assignment) == 2 for m in members)

    offsets = {tp: 1000 + tp[1] for m in members for tp in m.assignment}
    for m in members:
        m.commit({tp: offsets[tp] for tp in m.assignment})
    assert members[0].committed() == offsets

    shard = partition_for(group, SHARDS)
    leader = groups.shard_leader(shard)
    assert leader in DAEMONS
    groups.daemons[leader].kill()
    wait_until(lambda: groups.shard_leader(shard) not in (None, leader), timeout_s=60,
               what="shard moved to another daemon")  # fmt: skip
    # Members carry on: the new coordinator serves commits and the offsets are intact.
    assert wait_until(lambda: _committed_or_none(members[1]), timeout_s=60) == offsets
    wait_until(lambda: _commit_ok(members, offsets), timeout_s=90, what="commits after failover")
    with GroupAdmin(groups.bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as admin:
        [described] = admin.describe_groups([group])
        assert described.state == "Stable"
        assert len(described.members) == 20


def _committed_or_none(member: GroupMember) -> dict[tuple[str, int], int] | None:
    try:
        return member.committed()
    except Exception:
        return None


def _commit_ok(members: list[GroupMember], offsets: dict[tuple[str, int], int]) -> bool:
    try:
        for m in members:
            m.commit({tp: offsets[tp] + 1 for tp in m.assignment})
    except Exception:
        return False
    return True


def test_restart_reloads_from_the_checkpoint_and_static_members_rejoin_quietly(
    groups: GroupCluster, prefix: str
) -> None:
    topic = _topic(groups.bootstrap, f"{prefix}jobs", 4)
    group = f"{prefix}workers"
    static = groups.member(group, topic, group_instance_id="worker-a").start()
    other = groups.member(group, topic, group_instance_id="worker-b").start()
    wait_until(lambda: _stable([static, other]), timeout_s=60, what="static group stable")
    generation = static.generation
    for i in range(50):
        static.commit({tp: i for tp in static.assignment})

    # A static member that restarts with the same instance id gets its partitions back
    # without a new generation.
    before = static.assignment
    static.close(leave=False)
    again = groups.member(group, topic, group_instance_id="worker-a").start()
    wait_until(lambda: again.wait_assigned(0), timeout_s=60, what="static rejoin")
    assert again.assignment == before
    assert again.generation == generation
    assert other.generation == generation

    # Restart the shard's daemon: it loads from its checkpoint, not from offset 0.
    shard = partition_for(group, SHARDS)
    leader = groups.shard_leader(shard)
    assert leader is not None
    groups.daemons[leader].stop()
    restarted = groups.start_daemon(leader)
    ready = restarted.wait_for("daemon ready")
    # 50+ commit records are in the shard's log; the restart replays only past its checkpoint.
    assert ready["records_replayed"] < 50
    assert ready["poison_skipped"] == 0


def test_groups_commands_end_to_end(groups: GroupCluster, prefix: str) -> None:
    from confluent_kafka import Producer
    from typer.testing import CliRunner

    from kafkacoord.cli.main import app

    topic = _topic(groups.bootstrap, f"{prefix}orders", 2)
    producer = Producer({"bootstrap.servers": groups.bootstrap, "linger.ms": 20})
    for i in range(30):
        producer.produce(topic, b"v", b"k", partition=i % 2)
    producer.flush(30)
    group = f"{prefix}cli-group"
    member = groups.member(group, topic).start()
    wait_until(lambda: member.wait_assigned(0), what="member assigned")
    member.commit({(topic, 0): 5, (topic, 1): 7})
    runner = CliRunner()
    env = {"KAFKACOORD_BOOTSTRAP": groups.bootstrap, "KAFKACOORD_TOPIC_PREFIX": prefix,
           "KAFKACOORD_OFFSETS_PARTITIONS": str(SHARDS)}  # fmt: skip

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, ["groups", *args], env=env)
        assert result.exit_code == code, result.output
        return result.output

    assert group in run("list").split()
    rows = [line.split() for line in run("describe", "--group", group).splitlines()[1:]]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: 15 records per partition.
    assert [r[1:6] for r in rows] == [[topic, "0", "5", "15", "10"], [topic, "1", "7", "15", "8"]]
    assert "Stable" in run("describe", "--group", group, "--state")
    # Resetting needs an empty group: refused while the member is in it (exit 4).
    refused = run("reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                  "--execute", code=4)  # fmt: skip
    assert "can only be reset if the group" in refused and "state is Stable" in refused
    member.close()
    wait_until(lambda: "Empty" in run("describe", "--group", group, "--state"), what="empty")
    plan = run("reset-offsets", "--group", group, "--topic", topic, "--to-latest")
    assert "(dry run" in plan
    run("reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "99",
        "--execute")  # fmt: skip
    with GroupAdmin(groups.bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as admin:
        # --to-offset is clamped into the log: 15 is partition 1's end.
        assert {tp: p.offset for tp, p in admin.committed(group).items()} == {
            (topic, 0): 5, (topic, 1): 15}  # fmt: skip
    assert "Successful" in run("delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert "was successful" in run("delete", "--group", group)
    assert group not in run("list").split()
