"""A cluster's worth of controller and group records, and the check that views equal the cache.

The records follow what the controller and the group coordinator write:
elections (offline, preferred, controlled shutdown), a reassignment through
its steps (docs/architecture.md#reassignment-trace), a topic deletion, a
controller failover with a late write of the old controller, a group
rebalancing, commits, a group deletion, expiries (an old client's explicit
expiry, a standalone consumer past retention, the coordinator's expiry
tombstones) and poison records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kafkacoord.codecs import RecordType, decode_key, decode_value, encode_key
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    GroupCause,
    GroupCauseKind,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
    TopicKey,
    TopicValue,
)
from kafkacoord.spark.assignment import encode_assignment, render
from kafkacoord.spark.views import read_view
from kafkacoord.spark.warehouse.history import metadata_as_of, metadata_history
from kafkacoord.storage.cache import NO_EXPIRY, ShardId, StateCache
from kafkacoord.storage.topics import InternalTopics

from .support import Raw, append, by, create_topic, record

DAY = 24 * 3600 * 1000
RETENTION_MS = 7 * DAY
OFFSETS_PARTITIONS = 3
USER_PARTITION_SIZES = (10, 5, 0)


def java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_of(group: str) -> int:
    return abs(java_hash(group)) % OFFSETS_PARTITIONS


@dataclass
class Scenario:
    topics: InternalTopics
    user_topic: str
    now_ms: int
    metadata: list[Raw] = field(default_factory=list)
    offsets: list[Raw] = field(default_factory=list)
    poison: dict[str, int] = field(default_factory=dict)
    fenced: int = 0

    # -- metadata ----------------------------------------------------------------

    def meta(self, key: Any, value: Any) -> None:
        self.metadata.append(record(key, value))

    def part(
        self,
        topic: str,
        p: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        *epochs: int,
        controller_epoch: int = 1,
        election: str = "",
        state: PartitionState = PartitionState.ONLINE,
        reassignment: Reassignment | None = None,
    ) -> None:
        """``epochs``: leader, leader epoch, partition epoch."""
        leader, leader_epoch, partition_epoch = epochs
        self.meta(
            PartitionKey(topic, p),
            PartitionValue(
                topic,
                p,
                state,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                self.now_ms + len(self.metadata),
                controller_epoch,
                reassignment,
                election,
            ),
        )

    def node(self, n: int, *, epoch: int = 1, fenced: bool = False, shutting_down: bool = False,
             controller_epoch: int = 1) -> None:  # fmt: skip
        self.meta(
            NodeKey(n),
            NodeValue(
                n,
                f"inc{n}-{epoch}",
                epoch,
                fenced,
                self.now_ms,
                controller_epoch,
                rack=f"r{n % 3}",
                shutting_down=shutting_down,
            ),
        )

    # -- offsets -----------------------------------------------------------------

    def group(self, name: str, generation: int, members: dict[str, dict[str, list[int]]],
              state_ms: int | None = None, cause: GroupCause | None = None) -> None:  # fmt: skip
        value = GroupMetadataValue(
            "consumer",
            generation,
            state_ms if state_ms is not None else self.now_ms,
            tuple(
                GroupMember(
                    m,
                    f"client-{m}",
                    f"/10.0.0.{i}",
                    300_000,
                    45_000,
                    b"",
                    encode_assignment(assignment),
                )
                for i, (m, assignment) in enumerate(sorted(members.items()))
            ),
            "range" if members else None,
            min(members) if members else None,
            cause,
        )
        self.offsets.append(record(GroupMetadataKey(name), value, shard_of(name)))

    def commit(self, group: str, p: int, offset: int, *, ts: int | None = None,
               expire: int | None = None) -> None:  # fmt: skip
        value = OffsetCommitValue(offset, f"m{offset}", ts or self.now_ms, 0, expire)
        self.offsets.append(record(OffsetCommitKey(group, self.user_topic, p), value,
                                   shard_of(group)))  # fmt: skip

    def delete(self, key: Any, group: str) -> None:
        self.offsets.append(record(key, None, shard_of(group)))


def build(topics: InternalTopics, user_topic: str, now_ms: int) -> Scenario:
    s = Scenario(topics, user_topic, now_ms)
    # Controller 1 registers nodes and creates "orders" (3 partitions, RF 3).
    s.meta(ControllerKey(), ControllerValue(1, 1, "c1", now_ms))
    for n in range(1, 7):
        s.node(n)
    s.meta(TopicKey("orders"), TopicValue("orders", "id-orders", 3, 3, now_ms, 1))
    for p, replicas in enumerate([(1, 2, 3), (2, 3, 1), (3, 1, 2)]):
        s.part("orders", p, replicas, (), -1, 0, 0, state=PartitionState.NEW)
        s.part("orders", p, replicas, replicas, replicas[0], 1, 1, election="offline")
    # Node 1 is fenced: orders-0 fails over to 2; node 1 returns; a preferred election.
    s.node(1, epoch=1, fenced=True)
    s.part("orders", 0, (1, 2, 3), (2, 3), 2, 2, 2, election="offline")
    s.node(1, epoch=2)
    s.part("orders", 0, (1, 2, 3), (2, 3, 1), 2, 2, 3, election="offline")
    s.part("orders", 0, (1, 2, 3), (2, 3, 1), 1, 3, 4, election="preferred")
    # Reassignment of orders-1 from {2,3,1} to {4,5,6} (docs/architecture.md#reassignment-trace).
    ors, trs = (2, 3, 1), (4, 5, 6)

    def step(name: str) -> Reassignment:
        return Reassignment(ors, trs, trs, ors, name, now_ms)

    s.part("orders", 1, trs + ors, ors, 2, 2, 2, election="offline", reassignment=step("A2"))
    s.part("orders", 1, trs + ors, ors + trs, 2, 2, 3, election="offline", reassignment=step("B3"))
    s.part("orders", 1, trs + ors, ors + trs, 4, 3, 4, election="reassign",
           reassignment=step("B4"))  # fmt: skip
    s.part("orders", 1, trs + ors, trs, 4, 3, 5, election="reassign", reassignment=step("B6"))
    s.part("orders", 1, trs, trs, 4, 3, 6, election="reassign")
    # Topic "old" is created, queued for deletion, then tombstoned.
    s.meta(TopicKey("old"), TopicValue("old", "id-old", 1, 1, now_ms, 1))
    s.part("old", 0, (5,), (5,), 5, 1, 1, election="offline")
    s.meta(TopicKey("old"), TopicValue("old", "id-old", 1, 1, now_ms, 1, deleting=True))
    s.meta(PartitionKey("old", 0), None)
    s.meta(TopicKey("old"), None)
    # Controller failover; the old controller's late write is fenced.
    s.meta(ControllerKey(), ControllerValue(2, 2, "c2", now_ms + 1))
    s.part("orders", 2, (3, 1, 2), (3, 1, 2), 1, 2, 2, controller_epoch=1, election="zombie")
    s.fenced += 1
    # Controlled shutdown of node 3 moves orders-2 to node 1.
    s.node(3, shutting_down=True, controller_epoch=2)
    s.part("orders", 2, (3, 1, 2), (1, 2), 1, 2, 2, controller_epoch=2,
           election="controlled_shutdown")  # fmt: skip
    # Poison: garbage, and a bad value for orders-0 (its previous record stands).
    s.metadata.append((0, b"\x7fjunk", b"junk"))
    s.metadata.append((0, encode_key(PartitionKey("orders", 0)), b"\x00\x01\x02"))
    s.poison[topics.metadata] = 2

    # Group "payments" rebalances from one member to two, committing as it goes.
    s.group("payments", 1, {"a": {user_topic: [0, 1, 2]}})
    s.commit("payments", 0, 3, ts=now_ms - 20_000)
    s.commit("payments", 1, 5)
    s.group("payments", 2, {"a": {user_topic: [0, 1]}, "b": {user_topic: [2]}},
            cause=GroupCause(GroupCauseKind.MEMBER_JOINED, member_id="b"))  # fmt: skip
    s.commit("payments", 0, 7, ts=now_ms - 10_000)
    s.commit("payments", 2, 0)
    # "batch" empties out (state timestamp now: its offsets live on for the retention).
    s.group("batch", 1, {"c": {user_topic: [0]}})
    s.commit("batch", 0, 4)
    s.group("batch", 2, {}, cause=GroupCause(GroupCauseKind.MEMBER_LEFT, member_id="c"))
    # A standalone consumer: one fresh commit, one past retention.
    s.commit("solo", 1, 2)
    s.commit("solo", 2, 0, ts=now_ms - 8 * DAY)
    # An old client's explicit expiry, already past.
    s.commit("legacy", 0, 1, expire=now_ms - 1_000)
    # "gone" is deleted; "expired" had its offsets expired by the coordinator.
    for name in ("gone", "expired"):
        s.group(name, 1, {})
        s.commit(name, 0, 9)
        s.delete(OffsetCommitKey(name, user_topic, 0), name)
        s.delete(GroupMetadataKey(name), name)
    # Poison: garbage, a bad value for a live key, a metadata record in the offsets topic.
    payments_key = encode_key(OffsetCommitKey("payments", user_topic, 0))
    s.offsets.append((shard_of("payments"), payments_key, b"\x00\x02\xff"))  # offset 7 stays
    s.offsets.append((0, b"\x0b\x01\xff\xff", b"x"))
    s.offsets.append(record(NodeKey(1), NodeValue(1, "x", 1, False, 1, 1), 1))
    s.poison[topics.offsets] = 3
    return s


def write(bootstrap: str, s: Scenario) -> None:
    create_topic(bootstrap, s.user_topic, len(USER_PARTITION_SIZES))
    user_records = [(p, b"k", b"v") for p, n in enumerate(USER_PARTITION_SIZES) for _ in range(n)]
    append(bootstrap, s.user_topic, user_records)
    append(bootstrap, s.topics.metadata, s.metadata)
    append(bootstrap, s.topics.offsets, s.offsets)


def cache_records(cache: StateCache, topic: str, partitions: int, now_ms: int
                  ) -> list[tuple[int, Any, Any]]:  # fmt: skip
    """(shard, key, value) of every live, unexpired record the cache holds."""
    found = []
    for p in range(partitions):
        for entry in cache.shard(ShardId(topic, p)).entries():
            if entry.expires_at != NO_EXPIRY and entry.expires_at <= now_ms:
                continue  # expired
            key = decode_key(entry.key)
            found.append((p, key, decode_value(RecordType(entry.key[0]), entry.value)))
    return found


def assert_views_match_cache(warehouse: Any, cache: StateCache, s: Scenario) -> None:
    now = s.now_ms
    meta = cache_records(cache, s.topics.metadata, 1, now)
    offs = cache_records(cache, s.topics.offsets, OFFSETS_PARTITIONS, now)

    def view(name: str) -> list[dict[str, Any]]:
        return list(read_view(warehouse, name, now_ms=now).to_pylist())

    # metadata_history: every admitted metadata record once (poison and fenced left out);
    # as of now, each key's newest record: the cache's partitions.
    history = metadata_history(warehouse)
    admitted = len(s.metadata) - s.poison[s.topics.metadata] - s.fenced
    assert history.num_rows == admitted
    assert history.column("log_offset").to_pylist() == sorted(
        set(history["log_offset"].to_pylist())
    )
    in_effect = metadata_as_of(warehouse, int(time.time() * 1000) + 3_600_000).to_pylist()
    records = [r["partition_record"] for r in in_effect if r["record_type"] == "PARTITION"]
    leaders = {(r["topic"], r["partition"]): r["leader"] for r in records}
    assert leaders == {(k.topic, k.partition): v.leader for _, k, v in meta
                       if isinstance(k, PartitionKey)}  # fmt: skip

    # partitions: one row per cached partition record, field for field.
    parts = {(k.topic, k.partition): v for _, k, v in meta if isinstance(k, PartitionKey)}
    got = by(view("partitions"), "topic", "partition")
    assert set(got) == set(parts)
    for key, v in parts.items():
        row = got[key]
        r = v.reassignment
        assert (row["leader"], row["replicas"], row["isr"], row["leader_epoch"],
                row["partition_epoch"], row["state"], row["election"], row["controller_epoch"],
                row["adding_replicas"], row["removing_replicas"], row["reassignment_step"]) == (
            v.leader, list(v.replicas), list(v.isr), v.leader_epoch, v.partition_epoch,
            v.state.value, v.election, v.controller_epoch,
            list(r.adding_replicas) if r else [], list(r.removing_replicas) if r else [],
            r.step if r else None,
        ), key  # fmt: skip
        assert row["preferred_leader"] == v.replicas[0]
        assert row["under_replicated"] == (len(v.isr) < len(v.replicas))

    # brokers: the auto rebalance's counts, recomputed here from the cached records.
    nodes = {k.node_id: v for _, k, v in meta if isinstance(k, NodeKey)}
    brokers = {r["node"]: r for r in view("brokers")}
    assert set(brokers) == set(nodes)
    for n, v in nodes.items():
        preferred = [p for p in parts.values() if p.replicas and p.replicas[0] == n]
        not_led = [p for p in preferred if p.leader != n]
        row = brokers[n]
        assert row["alive"] == (not v.fenced) and row["rack"] == v.rack
        assert row["leaders"] == sum(1 for p in parts.values() if p.leader == n)
        assert row["preferred_leaders"] == len(preferred)
        ratio = len(not_led) / len(preferred) if preferred else 0.0
        assert row["imbalance_ratio"] == ratio
        assert row["would_trigger_rebalance"] == (ratio > 0.10)

    # leadership_history: the first admitted record of every leader epoch, in order.
    expected_history: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    controller = 0
    for _, raw_key, raw_value in s.metadata:
        try:
            key, value = decode_key(raw_key), decode_value(RecordType(raw_key[0]), raw_value)
        except Exception:
            continue
        if isinstance(value, ControllerValue):
            controller = max(controller, value.epoch)
        if isinstance(value, PartitionValue) and value.controller_epoch >= controller:
            epochs = expected_history.setdefault((value.topic, value.partition), [])
            if value.leader_epoch not in [e for e, _, _ in epochs]:
                epochs.append((value.leader_epoch, value.leader, value.election))
    history = view("leadership_history")
    got_history: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for h in sorted(history, key=lambda h: (h["topic"], h["partition"], h["leader_epoch"])):
        got_history.setdefault((h["topic"], h["partition"]), []).append(
            (h["leader_epoch"], h["new_leader"], h["election"])
        )
    assert got_history == expected_history
    old_leaders = {
        (h["topic"], h["partition"], h["leader_epoch"]): h["old_leader"] for h in history
    }
    assert old_leaders[("orders", 0, 2)] == 1 and old_leaders[("orders", 0, 3)] == 2
    assert old_leaders[("orders", 1, 3)] == 2  # the reassignment's B3 election: 2 -> 4

    # groups and group_members.
    groups = {k.group: (shard, v) for shard, k, v in offs if isinstance(k, GroupMetadataKey)}
    got_groups = {r["group"]: r for r in view("groups")}
    assert set(got_groups) == set(groups)
    for name, (shard, v) in groups.items():
        row = got_groups[name]
        assert (row["generation"], row["protocol"], row["leader"], row["members"],
                row["coordinator_shard"], row["state"]) == (
            v.generation, v.protocol, v.leader, len(v.members), shard,
            "Stable" if v.members else "Empty",
        )  # fmt: skip
        assert (row["rebalance_cause"], row["rebalance_cause_detail"]) == (
            (v.cause.kind, f"member {v.cause.member_id}") if v.cause else (None, None)
        )
    members = {(name, m.member_id): m for name, (_, v) in groups.items() for m in v.members}
    got_members = by(view("group_members"), "group", "member_id")
    assert set(got_members) == set(members)
    for key, m in members.items():
        row = got_members[key]
        assert (row["client_id"], row["host"], row["assignment"]) == (
            m.client_id,
            m.client_host,
            render(m.assignment),
        )

    # group_offsets: the cache's unexpired commits, with log end offsets and owners.
    commits = {
        (k.group, k.topic, k.partition): v for _, k, v in offs if isinstance(k, OffsetCommitKey)
    }
    got_offsets = by(view("group_offsets"), "group", "topic", "partition")
    assert set(got_offsets) == set(commits)
    owner = {(g, t, p): member for (g, member), m in members.items()
             for t, ps in _assignment(m.assignment).items() for p in ps}  # fmt: skip
    for key, v in commits.items():
        row = got_offsets[key]
        end = USER_PARTITION_SIZES[key[2]]
        assert (row["current_offset"], row["metadata"], row["leader_epoch"]) == (
            v.offset,
            v.metadata,
            v.leader_epoch,
        )
        assert (row["log_end_offset"], row["lag"]) == (end, max(0, end - v.offset)), key
        assert row["consumer_id"] == owner.get(key), key

    # lag_status: every visible offset is evaluated.
    lag = by(view("lag_status"), "group", "topic", "partition")
    assert set(lag) == set(commits)
    assert lag[("payments", s.user_topic, 2)]["status"] == "OK"  # nothing to consume

    # lag_history: the sampler's newest bucket of every visible offset holds its lag.
    shown = by(view("group_offsets"), "group", "topic", "partition", "coordinator_shard")
    newest = by(view("lag_history"), "group", "topic", "partition", "coordinator_shard")
    assert set(newest) == set(shown)  # later rows win: the newest bucket
    for key, row in newest.items():
        assert (row["committed_offset"], row["lag"]) == (
            shown[key]["current_offset"],
            shown[key]["lag"],
        ), (key, row)

    # skipped: every poison record and the fenced one, counted once.
    skipped = view("skipped")
    poison: dict[str, int] = {}
    for row in skipped:
        if row["kind"] == "poison":
            poison[row["topic"]] = poison.get(row["topic"], 0) + row["records"]
    assert poison == s.poison
    assert sum(r["records"] for r in skipped if r["kind"] == "fenced") == s.fenced


def _assignment(data: bytes) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    text = render(data)
    for part in filter(None, text.split(";")):
        topic, _, ps = part.rpartition(":")
        out[topic] = [int(p) for p in ps.split(",")]
    return out


def now_ms() -> int:
    return int(time.time() * 1000)
