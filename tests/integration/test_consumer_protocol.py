"""KIP-848 consumer groups on three daemons: server-side assignment, incremental
reconciliation with one owner per partition at every moment, a regex subscription that
picks up a new topic, commits at the member epoch, and a shard failover in the middle of
a rebalance."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewPartitions

from kafkacoord.client import ConsumerProtocolMember, GroupAdmin, GroupMember
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.storage.clients import admin_client

from .cluster import wait_until
from .test_groups_cluster import DAEMONS, SHARDS, GroupCluster, _topic

pytestmark = pytest.mark.integration

TP = tuple[str, int]
HINTED_INTERVAL_MS = 20_000


class Ownership:
    """Every member's callbacks, checked against one table: a partition is handed to a
    member only once its previous owner has given it up."""

    def __init__(self) -> None:
        self.owner: dict[TP, str] = {}
        self.violations: list[str] = []
        self._lock = threading.Lock()

    def callbacks(self, name: str) -> dict[str, object]:
        def assigned(partitions: frozenset[TP]) -> None:
            with self._lock:
                for tp in partitions:
                    other = self.owner.get(tp)
                    if other is not None and other != name:
                        self.violations.append(f"{tp} given to {name} while {other} owns it")
                    self.owner[tp] = name

        def revoked(partitions: frozenset[TP]) -> None:
            with self._lock:
                for tp in partitions:
                    if self.owner.get(tp) == name:
                        del self.owner[tp]

        return {"on_assigned": assigned, "on_revoked": revoked, "on_lost": revoked}


def _cluster(bootstrap: str, prefix: str, root: Path, heartbeat_ms: int) -> Iterator[GroupCluster]:
    c = GroupCluster(bootstrap, prefix, root)
    c.env.update(
        {
            "KAFKACOORD_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(heartbeat_ms),
            "KAFKACOORD_GROUP_CONSUMER_SESSION_TIMEOUT_MS": str(max(6000, heartbeat_ms * 3)),
            "KAFKACOORD_GROUP_CONSUMER_METADATA_REFRESH_MS": "500",
        }
    )
    try:
        for node in DAEMONS:
            c.start_daemon(node)
        wait_until(lambda: all(c.shard_leader(s) is not None for s in range(SHARDS)),
                   what="every group shard placed")  # fmt: skip
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[GroupCluster]:
    yield from _cluster(bootstrap, prefix, tmp_path, heartbeat_ms=500)


@pytest.fixture
def slow_cluster(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[GroupCluster]:
    """Members heartbeat every 20 s: only hints can make a rebalance quicker."""
    yield from _cluster(bootstrap, prefix, tmp_path, heartbeat_ms=HINTED_INTERVAL_MS)


def _settled(members: list[GroupMember], partitions: set[TP]) -> bool:
    owned = [tp for m in members for tp in m.assignment]
    counts = [len(m.assignment) for m in members]
    return (
        all(m.wait_assigned(0) for m in members)
        and len({m.generation for m in members}) == 1
        and len(owned) == len(set(owned))
        and set(owned) == partitions
        and max(counts) - min(counts) <= 1
    )


def test_consumer_protocol_group_reconciles_commits_and_fails_over(
    cluster: GroupCluster, prefix: str
) -> None:
    topic = _topic(cluster.bootstrap, f"{prefix}events", 12)
    group = f"{prefix}billing"
    ownership = Ownership()

    def member(name: str) -> GroupMember:
        # Subscribed by regex: topics created later join the subscription.
        m = ConsumerProtocolMember(
            cluster.bootstrap, group, [], topic_regex=f"{prefix}events.*",
            topic_prefix=prefix, offsets_partitions=SHARDS, rebalance_timeout_ms=15000,
            **ownership.callbacks(name),  # type: ignore[arg-type]
        )  # fmt: skip
        cluster.members.append(m)
        return m.start()

    members = [member(f"m{i}") for i in range(4)]
    everything = {(topic, p) for p in range(12)}
    wait_until(lambda: _settled(members, everything), timeout_s=60, what="4 members settled")
    assert {len(m.assignment) for m in members} == {3}

    # Commits carry the member epoch; a stale epoch is refused.
    offsets = {tp: 100 + tp[1] for m in members for tp in m.assignment}
    for m in members:
        m.commit({tp: offsets[tp] for tp in m.assignment})
    assert members[0].committed() == offsets
    epoch = members[0].generation
    members[0].generation = epoch - 1
    with pytest.raises(RequestError, match="STALE_MEMBER_EPOCH"):
        members[0].commit({tp: 1 for tp in members[0].assignment})
    members[0].generation = epoch
    assert members[0].committed() == offsets

    # A new topic matching the subscription reaches the group through the broker's metadata.
    more = _topic(cluster.bootstrap, f"{prefix}events-more", 4)
    everything |= {(more, p) for p in range(4)}
    wait_until(lambda: _settled(members, everything), timeout_s=60, what="16 partitions shared")

    # Two more members join, and the shard's daemon dies while they reconcile.
    members += [member("m4"), member("m5")]
    shard = partition_for(group, SHARDS)
    leader = cluster.shard_leader(shard)
    assert leader in DAEMONS
    cluster.daemons[leader].kill()
    wait_until(lambda: cluster.shard_leader(shard) not in (None, leader), timeout_s=60,
               what="shard moved to another daemon")  # fmt: skip
    wait_until(lambda: _settled(members, everything), timeout_s=90, what="6 members settled")
    assert not ownership.violations, ownership.violations
    assert members[1].committed() == offsets  # nothing committed was lost

    with GroupAdmin(cluster.bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as ga:
        [listed] = [g for g in ga.list_groups() if g.group_id == group]
        assert (listed.group_type, listed.state) == ("consumer", "Stable")
        # `groups describe` shows a consumer group in the classic columns.
        [described] = ga.describe_groups([group])
        assert (described.state, described.protocol) == ("Stable", "uniform")
        assert described.generation == members[0].generation
        assert len(described.members) == 6
        [detail] = ga.describe_consumer_groups([group])
        assert detail.assignment_epoch == detail.group_epoch == members[0].generation
        owned = {m.member_id: {(a.topic, p) for a in m.assignment for p in a.partitions}
                 for m in detail.members}  # fmt: skip
        assert owned == {m.member_id: set(m.assignment) for m in members}

    # Leaving hands the partitions to the others at once (no session timeout to wait out).
    for m in members[3:]:
        m.close()
    rest = members[:3]
    wait_until(lambda: _settled(rest, everything), timeout_s=30, what="3 members settled")
    assert not ownership.violations, ownership.violations


def test_hints_make_members_reconcile_before_their_heartbeat_is_due(
    slow_cluster: GroupCluster, prefix: str
) -> None:
    topic = _topic(slow_cluster.bootstrap, f"{prefix}jobs", 8)
    group = f"{prefix}hinted"
    ownership = Ownership()

    def member(name: str, *, hints: bool = True) -> GroupMember:
        m = slow_cluster.member(group, topic, protocol="consumer", hints=hints,
                                **ownership.callbacks(name))  # fmt: skip
        return m.start()

    everything = {(topic, p) for p in range(8)}
    first = member("a")
    wait_until(lambda: _settled([first], everything), timeout_s=30, what="one member")
    # A second member joins: the first must revoke before the second gets anything. A
    # member heartbeats at most every 16 s (20 s, up to 20% early) unless hinted.
    joined = time.monotonic()
    second = member("b")
    wait_until(lambda: _settled([first, second], everything), timeout_s=30, what="two members")
    assert time.monotonic() - joined < 0.8 * HINTED_INTERVAL_MS / 1000
    assert first.hints >= 1 and second.hints >= 1  # type: ignore[attr-defined]
    # A member that ignores hints still converges, at its own heartbeat.
    third = member("c", hints=False)
    members = [first, second, third]
    wait_until(lambda: _settled(members, everything), timeout_s=60, what="three members")
    assert third.hints == 0  # type: ignore[attr-defined]
    assert not ownership.violations, ownership.violations


def test_rolling_upgrade_from_the_classic_protocol(cluster: GroupCluster, prefix: str) -> None:
    topic = _topic(cluster.bootstrap, f"{prefix}orders", 6)
    group = f"{prefix}upgrading"
    ownership = Ownership()
    everything = {(topic, p) for p in range(6)}
    classic = [
        cluster.member(group, topic, **ownership.callbacks(f"classic-{i}")).start()
        for i in range(3)
    ]
    wait_until(lambda: _settled(classic, everything), timeout_s=60, what="classic group stable")
    offsets = {tp: 500 + tp[1] for m in classic for tp in m.assignment}
    for m in classic:
        m.commit({tp: offsets[tp] for tp in m.assignment})

    # Restart the members one by one on the consumer protocol.
    members = list(classic)
    for i, old in enumerate(classic):
        old.close()
        members.remove(old)
        new = cluster.member(group, topic, protocol="consumer",
                             **ownership.callbacks(f"consumer-{i}")).start()  # fmt: skip
        members.append(new)
        wait_until(lambda: _settled(members, everything), timeout_s=90,
                   what=f"settled after restart {i + 1}")  # fmt: skip
        assert not ownership.violations, ownership.violations

    with GroupAdmin(cluster.bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as ga:
        [detail] = ga.describe_consumer_groups([group])
        assert detail.state == "Stable" and len(detail.members) == 3
        [listed] = [g for g in ga.list_groups() if g.group_id == group]
        assert listed.group_type == "consumer"
        committed = {tp: v.offset for tp, v in ga.committed(group).items()}
        assert committed == offsets  # nothing committed was lost


def test_a_crashed_member_times_out_and_a_static_member_rejoins_quietly(
    cluster: GroupCluster, prefix: str
) -> None:
    topic = _topic(cluster.bootstrap, f"{prefix}tasks", 6)
    group = f"{prefix}crashy"
    ownership = Ownership()
    everything = {(topic, p) for p in range(6)}

    def member(name: str, instance: str | None = None) -> GroupMember:
        return cluster.member(group, topic, protocol="consumer", group_instance_id=instance,
                              **ownership.callbacks(name)).start()  # fmt: skip

    steady, crashing = member("steady"), member("crashing")
    static = member("static-1", instance="worker-s")
    wait_until(lambda: _settled([steady, crashing, static], everything), timeout_s=60,
               what="three members")  # fmt: skip
    # A crash: the member stops without leaving (its process gave up its partitions by
    # dying; close() reports them revoked); its session (6 s) runs out.
    crashing.close(leave=False)
    wait_until(lambda: _settled([steady, static], everything), timeout_s=30,
               what="the crashed member's partitions taken over")  # fmt: skip
    # A static member restarts: it leaves for a while (epoch -2) and comes back under a
    # new member id with its partitions and no new group epoch.
    kept, epoch = set(static.assignment), static.generation
    static.close()
    time.sleep(1.5)
    assert steady.generation == epoch and len(steady.assignment) == 6 - len(kept)
    back = member("static-2", instance="worker-s")
    wait_until(lambda: _settled([steady, back], everything), timeout_s=30, what="static back")
    assert set(back.assignment) == kept and back.generation == epoch
    assert back.member_id != static.member_id
    assert not ownership.violations, ownership.violations


@pytest.fixture
def kafka_cluster(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[GroupCluster]:
    """Apache Kafka only: the embedded tansu broker cannot add partitions."""
    yield from _cluster(kafka_bootstrap, prefix, tmp_path, heartbeat_ms=500)


def test_new_partitions_reach_the_members(kafka_cluster: GroupCluster, prefix: str) -> None:
    topic = _topic(kafka_cluster.bootstrap, f"{prefix}growing", 4)
    group = f"{prefix}growing"
    members = [kafka_cluster.member(group, topic, protocol="consumer").start() for _ in range(2)]
    wait_until(lambda: _settled(members, {(topic, p) for p in range(4)}), timeout_s=60,
               what="four partitions")  # fmt: skip
    epoch = members[0].generation
    admin = admin_client(kafka_cluster.bootstrap)
    for future in admin.create_partitions([NewPartitions(topic, 8)]).values():
        future.result(30)
    wait_until(lambda: _settled(members, {(topic, p) for p in range(8)}), timeout_s=60,
               what="eight partitions")  # fmt: skip
    assert members[0].generation > epoch
