"""Loading equivalence: a fresh shard replaying the log shows what the live shard persisted.

Kafka persists classic groups only at a few points, so the comparison is per group:

- a group at rest (Stable, or Empty) looks exactly the same after a reload;
- a group in the middle of a rebalance reloads as its last snapshot (Kafka: Stable with the
  previous generation's members, or Empty);
- committed offsets are identical.

Loading from the compacted log (the last record per key, in any order, as the runtime's cache
replays it) gives the same result as replaying the whole log.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.codecs.models import GroupMetadataKey
from kafkacoord.coordinator.groups.classic_group import ClassicGroup, GroupSnapshot
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import RequestRef

from .groupdriver import Driver, commit_body, join_body, leader_assignment, roundtrip

# --------------------------------------------------------------------------- the check


def durable_ids(shard: GroupShard) -> set[str]:
    out = set()
    for gid in shard.group_ids():
        group = shard.group(gid)
        assert group is not None
        if group.persisted is not None or shard.committed_offsets(gid):
            out.add(gid)
    return out


def expected_after_reload(group: ClassicGroup) -> GroupSnapshot:
    at_rest = group.state is GroupState.STABLE or (
        group.state is GroupState.EMPTY and not group.pending_members
    )
    if at_rest:
        return group.snapshot()
    if group.persisted is not None:
        return GroupSnapshot.from_record(group.group_id, group.persisted)
    return ClassicGroup(group.group_id).snapshot()  # a simple group, from its offsets


def assert_reload_equivalent(d: Driver) -> None:
    live = d.shard
    # The persisted snapshot of each group is the last record of its key.
    last = {r.key.group: r.value for r in d.log if isinstance(r.key, GroupMetadataKey)}
    for gid in live.group_ids():
        group = live.group(gid)
        assert group is not None
        assert group.persisted == last.get(gid), gid

    loaded = d.reload()
    assert loaded.offsets_snapshot() == live.offsets_snapshot()
    assert durable_ids(loaded) == durable_ids(live)
    for gid in durable_ids(live):
        group = live.group(gid)
        assert group is not None
        assert loaded.describe_group(gid) == expected_after_reload(group), gid

    # The compacted log, in any order, loads the same durable state.
    folded = d.folded()
    random.Random(len(folded)).shuffle(folded)
    compacted = d.reload(folded)
    assert compacted.offsets_snapshot() == loaded.offsets_snapshot()
    assert durable_ids(compacted) == durable_ids(loaded)
    for gid in durable_ids(loaded):
        assert compacted.describe_group(gid) == loaded.describe_group(gid)

    # Replay has no loading mode: a shard already serving, given the same records (each
    # group's offsets before its snapshot), ends with the same durable state.
    serving = GroupShard(d.config, d.partition)
    serving.on_loaded(d.now)
    for record in sorted(folded, key=lambda r: isinstance(r.key, GroupMetadataKey)):
        serving.replay(roundtrip(record))
    assert serving.offsets_snapshot() == compacted.offsets_snapshot()
    assert durable_ids(serving) == durable_ids(compacted)
    for gid in durable_ids(compacted):
        assert serving.describe_group(gid) == compacted.describe_group(gid)


# --------------------------------------------------------------------------- scripted


def test_scripted_lifecycle_reloads_equivalently() -> None:
    d = Driver()
    assert_reload_equivalent(d)
    members = d.form_group("g", 3, partitions={"t": 6})
    assert_reload_equivalent(d)
    for m in members:
        d.call(commit_body("g", {("t", 0): 5}, member_id=m.member_id, generation=1))
    d.call(commit_body("solo", {("x", 0): 1}))
    assert_reload_equivalent(d)
    leader = next(m for m in members if m.member_id == m.leader)
    d.request(join_body("g", leader.member_id))  # mid-rebalance
    assert_reload_equivalent(d)
    d.advance(60_000)  # everyone else times out; leader completes alone, never syncs
    assert_reload_equivalent(d)
    d.advance(60_000)
    assert d.state("g") is GroupState.EMPTY
    assert_reload_equivalent(d)
    d.call(api.DeleteGroups(groups=["g"]))
    assert_reload_equivalent(d)
    d.advance(GroupConfig().offsets_retention_ms + 600_000)
    assert d.shard.group_ids() == []
    assert_reload_equivalent(d)


# --------------------------------------------------------------------------- random


@dataclass
class Client:
    group: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    last_join: api.JoinGroupResponse | None = None
    topics: tuple[str, ...] = ("t",)
    synced: int = -1
    needs_rejoin: bool = False
    parked: set[str] = field(default_factory=set)


@dataclass
class World:
    d: Driver
    clients: list[Client]
    inflight: dict[RequestRef, tuple[int, str]] = field(default_factory=dict)
    seen: int = 0

    def send(self, idx: int, body: Body) -> None:
        ref = self.d.request(body, client_id=f"c{idx}")
        self.inflight[ref] = (idx, type(body).__name__)
        if idx >= 0:
            self.clients[idx].parked.add(type(body).__name__)
        self.absorb()

    def absorb(self) -> None:
        """Clients learn from every reply that arrived (including parked ones released)."""
        for reply in self.d.replies[self.seen :]:
            idx, api_name = self.inflight.pop(reply.to, (-1, ""))
            if idx < 0:
                continue
            c = self.clients[idx]
            c.parked.discard(api_name)
            body = reply.body
            if api_name == "JoinGroup":
                assert isinstance(body, api.JoinGroupResponse)
                if reply.error is ErrorCode.MEMBER_ID_REQUIRED:
                    c.member_id = body.member_id
                elif reply.error is ErrorCode.NONE:
                    c.member_id, c.generation, c.last_join = (
                        body.member_id,
                        body.generation_id,
                        body,
                    )
                    c.needs_rejoin = False
                elif reply.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1
            elif reply.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                c.member_id, c.generation = "", -1
            elif reply.error is ErrorCode.REBALANCE_IN_PROGRESS:
                c.needs_rejoin = True
            elif api_name == "SyncGroup" and reply.error is ErrorCode.NONE:
                c.synced = c.generation
        self.seen = len(self.d.replies)


GROUPS = ("g1", "g2")

op = st.one_of(
    # The natural next step of a well-behaved client, most of the time.
    *[st.tuples(st.just("act"), st.integers(0, 4), st.booleans())] * 6,
    st.tuples(st.just("join"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("sync"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("heartbeat"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("leave"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("commit"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("admin-commit"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("offset-delete"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("delete-group"), st.integers(0, 2), st.booleans()),
    st.tuples(
        st.just("advance"),
        st.sampled_from([100, 1_000, 3_000, 6_000, 12_000, 31_000, 700_000]),
        st.booleans(),
    ),
)


def run(world: World, step: tuple[str, int, bool]) -> None:
    kind, n, flag = step
    d = world.d
    if kind == "advance":
        d.advance(n)
        world.absorb()
        return
    if kind in ("admin-commit", "offset-delete", "delete-group"):
        group = ("g1", "g2", "solo")[n]
        if kind == "admin-commit":
            body: Body = commit_body(group, {("t", int(flag)): d.now % 1000})
        elif kind == "offset-delete":
            body = api.OffsetDelete(
                group_id=group, topics=[api.FetchTopic(name="t", partitions=[0, 1])]
            )
        else:
            body = api.DeleteGroups(groups=[group])
        world.send(-1, body)
        return
    c = world.clients[n]
    if kind == "act":
        if "JoinGroup" in c.parked:
            return  # wait for the rebalance
        if not c.member_id or c.generation < 0 or c.needs_rejoin:
            kind = "join"
            flag = c.topics != ("t",)
        elif c.synced != c.generation and "SyncGroup" not in c.parked:
            kind = "sync"
        else:
            kind = "heartbeat"
    if kind == "join":
        topics = ("t", "u") if flag else ("t",)
        c.topics = topics
        world.send(n, join_body(c.group, c.member_id, topics=topics, instance=c.instance))
    elif kind == "sync":
        assignments: list[api.SyncAssignment] = []
        if c.last_join is not None and c.last_join.leader == c.member_id and c.last_join.members:
            assignments = leader_assignment(c.last_join, {"t": 2, "u": 1}, "range")
        world.send(
            n,
            api.SyncGroup(
                group_id=c.group,
                generation_id=c.generation,
                member_id=c.member_id,
                group_instance_id=c.instance,
                assignments=assignments,
            ),
        )
    elif kind == "heartbeat":
        world.send(
            n,
            api.Heartbeat(
                group_id=c.group,
                generation_id=c.generation,
                member_id=c.member_id,
                group_instance_id=c.instance,
            ),
        )
    elif kind == "leave":
        ident = api.MemberIdentity(member_id=c.member_id, group_instance_id=c.instance)
        world.send(n, api.LeaveGroup(group_id=c.group, members=[ident]))
    elif kind == "commit":
        world.send(
            n,
            commit_body(
                c.group,
                {("t", int(flag)): d.now % 997},
                member_id=c.member_id,
                generation=c.generation,
                instance=c.instance,
            ),
        )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(op, min_size=1, max_size=45))
def test_random_operations_reload_equivalently(steps: list[tuple[str, int, bool]]) -> None:
    d = Driver(
        GroupConfig(offsets_retention_ms=2_000_000, offsets_retention_check_interval_ms=600_000)
    )
    clients = [
        Client("g1", None),
        Client("g1", "s-1"),
        Client("g1", None),
        Client("g2", "s-2"),
        Client("g2", None),
    ]
    world = World(d, clients)
    for step in steps:
        run(world, step)
        if step[0] == "advance":
            assert_reload_equivalent(d)
    assert_reload_equivalent(d)
    # Unloading answers whatever is still parked, exactly once per request.
    parked = set(world.inflight)
    answered = {r.to for r in d.shard.on_unloaded()}
    assert answered <= parked
