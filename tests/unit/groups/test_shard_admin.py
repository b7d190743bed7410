"""GroupShard: ListGroups, DescribeGroups, DeleteGroups, loading, unloading, dispatch."""

from __future__ import annotations

import pytest

from kafkacoord.codecs.models import (
    AdminOffset,
    GroupAdminAction,
    GroupAdminKey,
    GroupAdminValue,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    NodeKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.scheduling import EXPIRATION_TIMER, heartbeat_timer, join_timer
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import Empty, ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record, Request, RequestRef

from .groupdriver import DELAY, SESSION, T0, Driver, commit_body, join_body, sub

G = "g"


def listed(d: Driver, *states: str) -> list[tuple[str, str, str]]:
    reply = d.call(api.ListGroups(states_filter=list(states)))
    assert isinstance(reply.body, api.ListGroupsResponse)
    return [(g.group_id, g.protocol_type, g.state) for g in reply.body.groups]


def describe(d: Driver, *groups: str) -> list[api.DescribedGroup]:
    reply = d.call(api.DescribeGroups(groups=list(groups)))
    assert isinstance(reply.body, api.DescribeGroupsResponse)
    return reply.body.groups


def delete(d: Driver, *groups: str) -> dict[str, ErrorCode]:
    reply = d.call(api.DeleteGroups(groups=list(groups)))
    assert isinstance(reply.body, api.DeleteGroupsResponse)
    return {r.group_id: r.error for r in reply.body.results}


def mixed_groups(d: Driver) -> None:
    d.form_group("stable", 2)
    d.call(commit_body("simple", {("t", 0): 1}))
    (m,) = d.form_group("empty", 1)
    d.call(api.LeaveGroup(group_id="empty", members=[api.MemberIdentity(member_id=m.member_id)]))
    # Last, so that no time passes: it stays in its initial delay.
    d.request(join_body("preparing", d.new_member_id("preparing")))


# --------------------------------------------------------------------------- ListGroups


def test_list_groups_with_and_without_state_filter() -> None:
    d = Driver()
    mixed_groups(d)
    assert listed(d) == [
        ("empty", "consumer", "Empty"),
        ("preparing", "consumer", "PreparingRebalance"),
        ("simple", "", "Empty"),
        ("stable", "consumer", "Stable"),
    ]
    assert listed(d, "empty") == [("empty", "consumer", "Empty"), ("simple", "", "Empty")]
    assert listed(d, "Stable", "PREPARINGREBALANCE") == [
        ("preparing", "consumer", "PreparingRebalance"),
        ("stable", "consumer", "Stable"),
    ]
    assert listed(d, "Dead") == []


# --------------------------------------------------------------------------- DescribeGroups


def test_describe_stable_group_shows_protocol_and_metadata() -> None:
    d = Driver()
    members = d.form_group(G, 2, topics=("t",))
    (g,) = describe(d, G)
    assert g.error is ErrorCode.NONE and g.state == "Stable"
    assert g.protocol_type == "consumer" and g.protocol == "range" and g.generation == 1
    assert g.leader == members[0].leader
    assert {m.member_id for m in g.members} == {m.member_id for m in members}
    for m in g.members:
        assert m.metadata == sub("t") and m.assignment and m.client_id == "client"
        assert m.client_host == "/127.0.0.1"


def test_describe_rebalancing_unknown_and_invalid() -> None:
    d = Driver()
    mixed_groups(d)
    prep, unknown, invalid, simple = describe(d, "preparing", "nope", "", "simple")
    assert prep.state == "PreparingRebalance" and prep.protocol == ""
    assert all(m.metadata == b"" for m in prep.members) and len(prep.members) == 1
    assert unknown.state == "Dead" and unknown.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert invalid.error is ErrorCode.INVALID_GROUP_ID
    assert simple.state == "Empty" and simple.protocol_type == "" and simple.members == []


# --------------------------------------------------------------------------- DeleteGroups


def test_delete_groups() -> None:
    d = Driver()
    mixed_groups(d)
    d.call(commit_body("empty", {("t", 0): 1, ("u", 2): 3}))
    log_len = len(d.log)
    result = delete(d, "empty", "simple", "stable", "preparing", "nope", "", "empty")
    assert result == {
        "empty": ErrorCode.NONE,
        "simple": ErrorCode.NONE,
        "stable": ErrorCode.NON_EMPTY_GROUP,
        "preparing": ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
        "": ErrorCode.INVALID_GROUP_ID,
    }
    written = [(r.key, r.value) for r in d.log[log_len:]]
    # Each deletion comes after its audit record and that record's tombstone.
    audits = [(i, k, v) for i, (k, v) in enumerate(written) if isinstance(k, GroupAdminKey)]
    assert [(i, k.group, v is None) for i, k, v in audits] == [
        (0, "empty", False), (1, "empty", True), (5, "simple", False), (6, "simple", True)
    ]  # fmt: skip
    assert audits[0][1] == audits[1][1] and audits[0][1].request_id.startswith("client:")
    empty_audit = audits[0][2]
    assert isinstance(empty_audit, GroupAdminValue)
    assert empty_audit.action == GroupAdminAction.GROUP_DELETED
    assert empty_audit.client_id == "client" and empty_audit.principal is None
    assert empty_audit.at_ms == d.now
    assert empty_audit.offsets == (AdminOffset("t", 0, 1, None), AdminOffset("u", 2, 3, None))
    assert [(k, v) for k, v in written if not isinstance(k, GroupAdminKey)] == [
        (OffsetCommitKey("empty", "t", 0), None),
        (OffsetCommitKey("empty", "u", 2), None),
        (GroupMetadataKey("empty"), None),
        (OffsetCommitKey("simple", "t", 0), None),
        (GroupMetadataKey("simple"), None),
    ]
    assert d.shard.group("empty") is None and d.shard.group("simple") is None
    assert d.shard.committed_offsets("empty") == {}
    assert sorted(d.reload().group_ids()) == ["stable"]


# --------------------------------------------------------------------------- dispatch


def test_requests_before_load_get_load_in_progress() -> None:
    d = Driver(load=False)
    reply = d.call(api.ListGroups())
    assert reply.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert reply.error.retriable


def test_unknown_api_or_wrong_body_is_invalid_request() -> None:
    d = Driver()
    ref = RequestRef("c", 1)
    out = d.shard.handle(Request(ref, "Frobnicate", Empty()), d.now)
    assert out.replies[0].error is ErrorCode.INVALID_REQUEST
    out = d.shard.handle(Request(ref, "JoinGroup", api.ListGroups()), d.now)
    assert out.replies[0].error is ErrorCode.INVALID_REQUEST and out.replies[0].to == ref


def test_replay_rejects_foreign_records() -> None:
    shard = GroupShard(GroupConfig(), 0)
    with pytest.raises(TypeError):
        shard.replay(Record(NodeKey(1), None))
    with pytest.raises(TypeError):
        shard.replay(Record(GroupMetadataKey(G), OffsetCommitValue(1, "", 0)))


# --------------------------------------------------------------------------- load / unload


def loaded_stable_group(now: int) -> GroupShard:
    shard = GroupShard(GroupConfig(max_size=None), 3)
    members = tuple(
        GroupMember(f"m{i}", "c", "h", 30_000, SESSION, sub("t"), b"A", None) for i in range(2)
    )
    shard.replay(
        Record(
            GroupMetadataKey(G),
            GroupMetadataValue("consumer", 4, now - 1_000, members, "range", "m0"),
        )
    )
    shard.replay(Record(OffsetCommitKey(G, "t", 0), OffsetCommitValue(5, "", now - 500)))
    return shard


def test_on_loaded_schedules_member_sessions_and_expiration() -> None:
    shard = loaded_stable_group(T0)
    assert shard.next_deadline_ms() is None
    assert shard.handle(Request(RequestRef("c", 1), "ListGroups", api.ListGroups()), T0)
    result = shard.on_loaded(T0)
    assert not result
    group = shard.group(G)
    assert group is not None and group.state is GroupState.STABLE and group.generation == 4
    assert group.members["m0"].protocols == (("range", sub("t")),)
    assert shard.timer_deadline(heartbeat_timer(G, "m0")) == T0 + SESSION
    assert shard.timer_deadline(EXPIRATION_TIMER) == T0 + 600_000
    # Nobody heartbeats: both expire, the group empties and says so durably.
    out = shard.fire_timers(T0 + SESSION)
    (record,) = out.records
    assert record.key == GroupMetadataKey(G)
    assert isinstance(record.value, GroupMetadataValue) and record.value.members == ()
    assert record.value.generation == 5


def test_loaded_group_over_max_size_rebalances() -> None:
    shard = GroupShard(GroupConfig(max_size=1), 0)
    for record in [
        Record(
            GroupMetadataKey(G),
            GroupMetadataValue(
                "consumer",
                1,
                T0,
                tuple(
                    GroupMember(f"m{i}", "c", "h", 30_000, SESSION, sub("t"), b"", None)
                    for i in range(2)
                ),
                "range",
                "m0",
            ),
        )
    ]:
        shard.replay(record)
    shard.on_loaded(T0)
    group = shard.group(G)
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    assert shard.timer_deadline(join_timer(G)) == T0 + 30_000


def test_on_unloaded_answers_parked_requests_and_clears_everything() -> None:
    d = Driver()
    members = d.form_group("s", 2)
    leader = next(m for m in members if m.member_id == m.leader)
    parked_join = d.request(join_body("s", leader.member_id))
    a, b = d.new_member_id(G), d.new_member_id(G)
    ra, rb = d.request(join_body(G, a)), d.request(join_body(G, b))
    d.advance(2 * DELAY)
    resp = d.join_response(ra)
    follower = b if resp.leader == a else a
    parked_sync = d.request(api.SyncGroup(group_id=G, generation_id=1, member_id=follower))
    assert d.reply(rb) is not None
    replies = d.shard.on_unloaded()
    by_ref = {r.to: r for r in replies}
    assert by_ref[parked_join].error is ErrorCode.NOT_COORDINATOR
    assert by_ref[parked_sync].error is ErrorCode.NOT_COORDINATOR
    assert len(replies) == 2
    assert d.shard.next_deadline_ms() is None and d.shard.group_ids() == []
    assert not d.shard.active


def test_group_tombstone_cancels_its_timers() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    d.shard.replay(Record(GroupMetadataKey(G), None))
    assert d.shard.group(G) is None
    assert d.shard.timer_deadline(heartbeat_timer(G, mid)) is None


def test_heartbeat_session_timer_refreshes_on_every_heartbeat() -> None:
    d = Driver(GroupConfig(min_session_timeout_ms=1_000))
    (m,) = d.form_group(G, 1, session=2_000)
    for _ in range(10):
        d.advance(1_500)
        hb = api.Heartbeat(group_id=G, generation_id=1, member_id=m.member_id)
        assert d.call(hb).error is ErrorCode.NONE
    assert d.state(G) is GroupState.STABLE
