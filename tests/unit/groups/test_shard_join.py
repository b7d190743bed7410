"""GroupShard: JoinGroup / SyncGroup / Heartbeat / LeaveGroup, states and timers."""

from __future__ import annotations

from kafkacoord.codecs.models import GroupMetadataKey, GroupMetadataValue
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.scheduling import heartbeat_timer, join_timer, sync_timer
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import Empty, ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import RequestRef

from .groupdriver import DELAY, REBALANCE, SESSION, Driver, join_body, sub

G = "g"


def heartbeat(d: Driver, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
    return d.call(
        api.Heartbeat(
            group_id=G, generation_id=generation, member_id=member_id, group_instance_id=instance
        )
    ).error


def sync(
    d: Driver,
    member_id: str,
    generation: int,
    assignments: list[api.SyncAssignment] | None = None,
) -> RequestRef:
    body = api.SyncGroup(
        group_id=G, generation_id=generation, member_id=member_id, assignments=assignments or []
    )
    return d.request(body)


def leave(d: Driver, *members: api.MemberIdentity) -> api.LeaveGroupResponse:
    reply = d.call(api.LeaveGroup(group_id=G, members=list(members)))
    assert isinstance(reply.body, api.LeaveGroupResponse)
    return reply.body


# --------------------------------------------------------------------------- first join


def test_first_join_gets_member_id_required_kip394() -> None:
    d = Driver()
    reply = d.call(join_body(G, client_id="app"))
    assert reply.error is ErrorCode.MEMBER_ID_REQUIRED
    assert isinstance(reply.body, api.JoinGroupResponse)
    assert reply.body.member_id == "app-1"
    group = d.shard.group(G)
    assert group is not None and group.state is GroupState.EMPTY
    assert group.is_pending("app-1")
    assert d.shard.timer_deadline(heartbeat_timer(G, "app-1")) == d.now + SESSION
    assert d.log == []  # nothing durable yet


def test_pending_member_expires_after_session_timeout_and_group_is_forgotten() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    d.advance(SESSION)
    group = d.shard.group(G)
    assert group is not None and not group.is_pending(mid)
    # The never-durable Empty group goes at the next expiration run, without a record.
    d.advance(d.config.offsets_retention_check_interval_ms)
    assert d.shard.group(G) is None
    assert d.log == []
    reply = d.call(join_body(G, mid))
    assert reply.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_initial_rebalance_waits_for_the_delay_then_completes() -> None:
    d = Driver()
    a = d.new_member_id(G)
    ref_a = d.request(join_body(G, a))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert d.reply(ref_a) is None
    assert d.shard.timer_deadline(join_timer(G)) == d.now + DELAY
    d.advance(DELAY - 1)
    assert d.reply(ref_a) is None
    d.advance(1)
    resp = d.join_response(ref_a)
    assert resp.generation_id == 1
    assert resp.leader == a and resp.member_id == a
    assert resp.protocol_name == "range" and resp.protocol_type == "consumer"
    assert [m.member_id for m in resp.members] == [a]
    assert d.state(G) is GroupState.COMPLETING_REBALANCE
    assert d.shard.timer_deadline(sync_timer(G)) == d.now + REBALANCE


def test_initial_delay_extends_per_new_member_bounded_by_rebalance_timeout() -> None:
    d = Driver()
    rebalance = 7_000
    start = d.now
    first = d.request(join_body(G, d.new_member_id(G, rebalance=rebalance), rebalance=rebalance))
    joins = [first]
    # Someone new joins every 500 ms, forever: the delay is extended by min(delay, remaining)
    # each time (3000 + 3000 + 1000) but never past the rebalance timeout.
    while d.reply(first) is None:
        d.advance(500)
        if d.reply(first) is None:
            mid = d.new_member_id(G, rebalance=rebalance)
            joins.append(d.request(join_body(G, mid, rebalance=rebalance)))
    assert d.now == start + rebalance
    assert d.join_response(first).generation_id == 1
    assert len(d.join_response(first).members) == len(joins)


def test_initial_delay_extension_stops_once_nobody_new_joins() -> None:
    d = Driver()
    start = d.now
    first = d.request(join_body(G, d.new_member_id(G)))
    d.advance(1_000)
    d.request(join_body(G, d.new_member_id(G)))
    d.advance(DELAY - 1_000)  # first delay ends: extended once
    assert d.reply(first) is None
    d.advance(DELAY)
    assert d.reply(first) is not None
    assert d.now == start + 2 * DELAY


def test_initial_delay_completes_without_extension_when_nobody_else_joins() -> None:
    d = Driver()
    ref = d.request(join_body(G, d.new_member_id(G)))
    d.advance(DELAY)
    assert d.join_response(ref).generation_id == 1


def test_full_flow_two_members_stable_and_record() -> None:
    d = Driver()
    members = d.form_group(G, 2, partitions={"t": 4})
    assert d.state(G) is GroupState.STABLE
    assert sorted(tp for m in members for tp in m.assignment) == [("t", p) for p in range(4)]
    assert all(len(m.assignment) == 2 for m in members)
    (record,) = d.log
    assert record.key == GroupMetadataKey(G)
    value = record.value
    assert isinstance(value, GroupMetadataValue)
    assert value.generation == 1 and value.protocol == "range" and value.protocol_type == "consumer"
    assert value.leader == members[0].leader
    assert {m.member_id for m in value.members} == {m.member_id for m in members}
    assert all(m.assignment for m in value.members)
    assert d.shard.timer_deadline(sync_timer(G)) is None  # everyone synced


def test_follower_sync_parked_until_leader_syncs() -> None:
    d = Driver()
    a, b = d.new_member_id(G), d.new_member_id(G)
    ra, rb = d.request(join_body(G, a)), d.request(join_body(G, b))
    d.advance(2 * DELAY)  # the second joiner extended the delay once
    ja, jb = d.join_response(ra), d.join_response(rb)
    leader, follower = (ja, jb) if ja.leader == a else (jb, ja)
    assert leader.members and not follower.members
    fref = sync(d, follower.member_id, 1)
    assert d.reply(fref) is None and d.log == []
    lref = sync(
        d,
        leader.member_id,
        1,
        assignments=[
            api.SyncAssignment(member_id=follower.member_id, assignment=b"F"),
            api.SyncAssignment(member_id=leader.member_id, assignment=b"L"),
        ],
    )
    assert d.sync_response(fref).assignment == b"F"
    assert d.sync_response(lref).assignment == b"L"
    assert d.state(G) is GroupState.STABLE
    # A SyncGroup in Stable returns the current assignment at once.
    again = sync(d, follower.member_id, 1)
    assert d.sync_response(again).assignment == b"F"


def test_leader_assignment_missing_members_get_empty_assignment() -> None:
    d = Driver()
    a, b = d.new_member_id(G), d.new_member_id(G)
    ra, _ = d.request(join_body(G, a)), d.request(join_body(G, b))
    d.advance(2 * DELAY)  # the second joiner extended the delay once
    leader = d.join_response(ra).leader
    follower = b if leader == a else a
    lref = sync(
        d, leader, 1, assignments=[api.SyncAssignment(member_id="stranger", assignment=b"x")]
    )
    assert d.sync_response(lref).assignment == b""
    assert d.sync_response(sync(d, follower, 1)).assignment == b""


def test_sync_errors() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    m = members[0]
    assert d.call(api.SyncGroup(group_id="", generation_id=1, member_id=m.member_id)).error is (
        ErrorCode.INVALID_GROUP_ID
    )
    assert d.call(api.SyncGroup(group_id="nope", generation_id=1, member_id="x")).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert d.call(api.SyncGroup(group_id=G, generation_id=1, member_id="x")).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert d.call(api.SyncGroup(group_id=G, generation_id=7, member_id=m.member_id)).error is (
        ErrorCode.ILLEGAL_GENERATION
    )
    wrong = api.SyncGroup(group_id=G, generation_id=1, member_id=m.member_id, protocol_name="rr")
    assert d.call(wrong).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong = api.SyncGroup(
        group_id=G, generation_id=1, member_id=m.member_id, protocol_type="connect"
    )
    assert d.call(wrong).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # PreparingRebalance: the leader rejoins.
    leader = next(x for x in members if x.member_id == x.leader)
    d.request(join_body(G, leader.member_id))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert d.call(api.SyncGroup(group_id=G, generation_id=1, member_id=m.member_id)).error is (
        ErrorCode.REBALANCE_IN_PROGRESS
    )


def test_sync_to_empty_group_is_unknown_member() -> None:
    d = Driver()
    d.new_member_id(G)
    assert d.call(api.SyncGroup(group_id=G, generation_id=0, member_id="x")).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


# --------------------------------------------------------------------------- rejoin rules


def test_leader_rejoin_in_stable_triggers_rebalance_follower_same_metadata_does_not() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    follower = next(m for m in members if m.member_id != m.leader)
    # Follower with unchanged metadata: current generation, no rebalance.
    resp = d.join_response(d.request(join_body(G, follower.member_id)))
    assert resp.generation_id == 1 and resp.members == [] and resp.leader == leader.member_id
    assert d.state(G) is GroupState.STABLE
    # Leader: rebalance.
    lref = d.request(join_body(G, leader.member_id))
    assert d.state(G) is GroupState.PREPARING_REBALANCE and d.reply(lref) is None
    assert heartbeat(d, follower.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    fref = d.request(join_body(G, follower.member_id))
    # Everyone rejoined: completes at once (not an initial rebalance).
    assert d.join_response(lref).generation_id == 2
    assert d.join_response(fref).generation_id == 2
    assert d.state(G) is GroupState.COMPLETING_REBALANCE


def test_follower_with_changed_metadata_triggers_rebalance() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    follower = next(m for m in members if m.member_id != m.leader)
    d.request(join_body(G, follower.member_id, topics=("t", "u")))
    assert d.state(G) is GroupState.PREPARING_REBALANCE


def test_rejoin_in_completing_rebalance_same_metadata_returns_same_generation() -> None:
    d = Driver()
    a, b = d.new_member_id(G), d.new_member_id(G)
    ra, _ = d.request(join_body(G, a)), d.request(join_body(G, b))
    d.advance(2 * DELAY)  # the second joiner extended the delay once
    leader = d.join_response(ra).leader
    # The leader lost its response and retries: same generation, members again.
    again = d.join_response(d.request(join_body(G, leader)))
    assert again.generation_id == 1 and len(again.members) == 2
    # A follower retrying gets no members.
    follower = b if leader == a else a
    assert d.join_response(d.request(join_body(G, follower))).members == []
    assert d.state(G) is GroupState.COMPLETING_REBALANCE
    # Changed metadata during CompletingRebalance: rebalance, parked syncs are told to rejoin.
    fsync = sync(d, follower, 1)
    d.request(join_body(G, leader, topics=("other",)))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    reply = d.reply(fsync)
    assert reply is not None and reply.error is ErrorCode.REBALANCE_IN_PROGRESS


def test_join_errors() -> None:
    d = Driver()
    assert d.call(join_body("")).error is ErrorCode.INVALID_GROUP_ID
    assert d.call(join_body(G, session=5_999)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert d.call(join_body(G, session=300_001)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert d.call(join_body(G, "ghost")).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert d.call(join_body(G, protocol_type="")).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert d.shard.group(G) is None  # failed first joins leave nothing behind
    d.form_group(G, 1)
    # A different protocol type, or no protocol in common with the members.
    reply = d.call(join_body(G, protocol_type="connect"))
    assert reply.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL and reply.message
    reply = d.call(join_body(G, names=("roundrobin",)))
    assert reply.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert "common" in (reply.message or "")
    assert d.call(join_body(G, "ghost")).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_join_existing_member_of_empty_group_is_unknown() -> None:
    d = Driver()
    members = d.form_group(G, 1)
    leave(d, api.MemberIdentity(member_id=members[0].member_id))
    assert d.state(G) is GroupState.EMPTY
    assert d.call(join_body(G, members[0].member_id)).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_protocol_selection_most_votes_among_common() -> None:
    d = Driver()
    specs = [("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin", "sticky", "range")]
    refs = []
    for names in specs:
        mid = d.new_member_id(G, names=names)
        refs.append(d.request(join_body(G, mid, names=names)))
    d.advance(2 * DELAY)  # the second joiner extended the delay once
    assert {d.join_response(r).protocol_name for r in refs} == {"roundrobin"}


def test_max_group_size() -> None:
    d = Driver(GroupConfig(max_size=2))
    members = d.form_group(G, 2)
    reply = d.call(join_body(G))
    assert reply.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert isinstance(reply.body, api.JoinGroupResponse) and reply.body.member_id == ""
    # Existing members are still accepted.
    assert d.join_response(d.request(join_body(G, members[1].member_id))).generation_id == 1


def test_max_group_size_during_rebalance_turns_away_last_rejoiner() -> None:
    d = Driver(GroupConfig(max_size=2))
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    follower = next(m for m in members if m is not leader)
    lref = d.request(join_body(G, leader.member_id))  # rebalance; 1 member parked
    newcomer = d.new_member_id(G)
    nref = d.request(join_body(G, newcomer))  # 2 parked: the group is full again
    reply = d.call(join_body(G, follower.member_id))
    assert reply.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    group = d.shard.group(G)
    assert group is not None and not group.has_member(follower.member_id)
    # Everyone left in the group has joined: the rebalance completes.
    assert d.join_response(lref).generation_id == 2
    assert d.join_response(nref).generation_id == 2


# --------------------------------------------------------------------------- heartbeats


def test_heartbeat_errors_and_states() -> None:
    d = Driver()
    assert d.call(api.Heartbeat(group_id="", generation_id=1, member_id="x")).error is (
        ErrorCode.INVALID_GROUP_ID
    )
    assert heartbeat(d, "x", 1) is ErrorCode.UNKNOWN_MEMBER_ID  # no group
    members = d.form_group(G, 2)
    m = members[0]
    ok = d.call(api.Heartbeat(group_id=G, generation_id=1, member_id=m.member_id))
    assert ok.error is ErrorCode.NONE and ok.body == Empty()
    assert heartbeat(d, m.member_id, 0) is ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(d, "x", 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeat_in_completing_rebalance_is_fine() -> None:
    d = Driver()
    ref = d.request(join_body(G, d.new_member_id(G)))
    d.advance(DELAY)
    resp = d.join_response(ref)
    assert heartbeat(d, resp.member_id, 1) is ErrorCode.NONE


def test_heartbeat_keeps_member_alive_and_session_expiry_removes_it() -> None:
    d = Driver()
    a, b = d.form_group(G, 2)
    d.advance(SESSION - 1_000)
    assert heartbeat(d, a.member_id, 1) is ErrorCode.NONE
    assert d.shard.timer_deadline(heartbeat_timer(G, a.member_id)) == d.now + SESSION
    d.advance(1_000)
    # b never heartbeated: it expired and the group rebalances without it.
    group = d.shard.group(G)
    assert group is not None and not group.has_member(b.member_id)
    assert group.has_member(a.member_id)
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert heartbeat(d, a.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    ref = d.request(join_body(G, a.member_id))
    resp = d.join_response(ref)
    assert resp.generation_id == 2 and [m.member_id for m in resp.members] == [a.member_id]


def test_session_expiry_of_last_member_makes_group_empty_with_record() -> None:
    d = Driver()
    d.form_group(G, 1)
    d.advance(SESSION)
    assert d.state(G) is GroupState.EMPTY
    value = d.log[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert value.members == () and value.generation == 2 and value.protocol is None
    assert value.protocol_type == "consumer" and value.state_timestamp_ms == d.now
    assert d.snapshot(G).state_timestamp_ms == d.now


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    d = Driver()
    members = d.form_group(G, 3)
    leader = next(m for m in members if m.member_id == m.leader)
    others = [m for m in members if m is not leader]
    lref = d.request(join_body(G, leader.member_id))
    rejoiner = d.request(join_body(G, others[0].member_id))
    # others[1] keeps heartbeating but never rejoins.
    for _ in range(REBALANCE // 5_000 - 1):
        d.advance(5_000)
        assert heartbeat(d, others[1].member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        assert heartbeat(d, leader.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        assert d.reply(lref) is None
    d.advance(5_000)
    resp = d.join_response(lref)
    assert resp.generation_id == 2
    assert {m.member_id for m in resp.members} == {leader.member_id, others[0].member_id}
    assert d.join_response(rejoiner).generation_id == 2
    assert heartbeat(d, others[1].member_id, 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_leader_that_does_not_rejoin_is_replaced() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    follower = next(m for m in members if m is not leader)
    fref = d.request(join_body(G, follower.member_id, topics=("t", "x")))  # forces a rebalance
    d.advance(5_000)
    heartbeat(d, leader.member_id, 1)
    d.advance(REBALANCE - 5_000)
    resp = d.join_response(fref)
    assert resp.leader == follower.member_id and resp.generation_id == 2


def test_sync_timeout_removes_members_that_never_synced() -> None:
    d = Driver()
    a, b = d.new_member_id(G), d.new_member_id(G)
    ra, rb = d.request(join_body(G, a)), d.request(join_body(G, b))
    d.advance(2 * DELAY)  # the second joiner extended the delay once
    leader = d.join_response(ra).leader
    follower = b if leader == a else a
    d.join_response(rb)
    sync(d, leader, 1, assignments=[])
    assert d.state(G) is GroupState.STABLE
    # The follower never sends SyncGroup; both heartbeat, though.
    for _ in range(REBALANCE // 5_000):
        d.advance(5_000)
        if d.state(G) is GroupState.STABLE:
            heartbeat(d, follower, 1)
            heartbeat(d, leader, 1)
    group = d.shard.group(G)
    assert group is not None and not group.has_member(follower)
    assert d.state(G) is GroupState.PREPARING_REBALANCE


def test_sync_timeout_in_completing_rebalance_when_leader_never_syncs() -> None:
    d = Driver()
    a = d.new_member_id(G)
    ra = d.request(join_body(G, a))
    d.advance(DELAY)
    d.join_response(ra)
    d.advance(REBALANCE)
    # The only member never synced: removed; the group becomes Empty.
    assert d.state(G) is GroupState.EMPTY


def test_parked_member_does_not_expire_but_new_member_does() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    a, b = members
    leader = a if a.member_id == a.leader else b
    other = b if leader is a else a
    # Leader rejoins and stays parked longer than its session: it is not expired.
    lref = d.request(join_body(G, leader.member_id))
    d.advance(SESSION + 1)
    group = d.shard.group(G)
    assert group is not None and group.has_member(leader.member_id)
    assert not group.has_member(other.member_id)  # it did not heartbeat: expired
    # All remaining members joined: completed.
    assert d.join_response(lref).generation_id == 2


def test_new_member_parked_join_times_out_after_new_member_join_timeout() -> None:
    d = Driver(GroupConfig(new_member_join_timeout_ms=60_000))
    (old,) = d.form_group(G, 1)
    newcomer = d.new_member_id(G)
    nref = d.request(join_body(G, newcomer, rebalance=200_000))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert d.shard.timer_deadline(join_timer(G)) == d.now + 200_000
    # The old member stays alive (heartbeats) but never rejoins.
    for _ in range(11):
        d.advance(5_000)
        assert heartbeat(d, old.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert d.reply(nref) is None
    d.advance(5_000)  # 60 s after the newcomer joined
    reply = d.reply(nref)
    assert reply is not None and reply.error is ErrorCode.UNKNOWN_MEMBER_ID
    group = d.shard.group(G)
    assert group is not None and not group.has_member(newcomer)
    # At the rebalance timeout the old member, which never rejoined, goes too: Empty.
    d.advance(200_000)
    assert d.state(G) is GroupState.EMPTY


# --------------------------------------------------------------------------- leave


def test_leave_group_variants() -> None:
    d = Driver()
    members = d.form_group(G, 3, instances=[None, "i-1", None])
    dyn, static, other = members
    pending = d.new_member_id(G)
    body = leave(
        d,
        api.MemberIdentity(member_id=dyn.member_id),
        api.MemberIdentity(member_id="", group_instance_id="i-1"),  # admin removal
        api.MemberIdentity(member_id=pending),
        api.MemberIdentity(member_id="ghost"),
        api.MemberIdentity(member_id="", group_instance_id="nobody"),
        api.MemberIdentity(member_id="wrong-id", group_instance_id="i-1"),
    )
    errors = [m.error for m in body.members]
    assert errors == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,  # the instance already left
    ]
    group = d.shard.group(G)
    assert group is not None
    assert list(group.members) == [other.member_id]
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert static.member_id not in group.members
    leave(d, api.MemberIdentity(member_id=other.member_id))
    assert d.state(G) is GroupState.EMPTY


def test_leave_of_fenced_static_member() -> None:
    d = Driver()
    d.form_group(G, 1, instances=["i-1"])
    body = leave(d, api.MemberIdentity(member_id="old", group_instance_id="i-1"))
    assert body.members[0].error is ErrorCode.FENCED_INSTANCE_ID


def test_leave_errors() -> None:
    d = Driver()
    assert d.call(api.LeaveGroup(group_id="", members=[api.MemberIdentity()])).error is (
        ErrorCode.INVALID_GROUP_ID
    )
    assert d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity()])).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_leave_during_preparing_completes_join_when_rest_joined() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    other = next(m for m in members if m is not leader)
    lref = d.request(join_body(G, leader.member_id))
    leave(d, api.MemberIdentity(member_id=other.member_id))
    resp = d.join_response(lref)
    assert resp.generation_id == 2 and [m.member_id for m in resp.members] == [leader.member_id]


def test_leave_while_parked_in_join_answers_the_join() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    lref = d.request(join_body(G, leader.member_id))
    leave(d, api.MemberIdentity(member_id=leader.member_id))
    reply = d.reply(lref)
    assert reply is not None and reply.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_initial_group_join_with_rebalance_timeout_defaulting_to_session() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    body = join_body(G, mid, rebalance=-1)
    d.request(body)
    group = d.shard.group(G)
    assert group is not None and group.members[mid].rebalance_timeout_ms == SESSION


def test_duplicate_protocol_names_first_wins() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    protos = [
        api.JoinProtocol(name="range", metadata=sub("a")),
        api.JoinProtocol(name="range", metadata=sub("b")),
    ]
    d.request(join_body(G, mid, protos=protos))
    group = d.shard.group(G)
    assert group is not None and group.members[mid].protocols == (("range", sub("a")),)


def test_timer_rescheduled_by_an_earlier_timer_of_the_same_instant_does_not_fire() -> None:
    d = Driver()
    members = d.form_group(G, 3)
    leader = next(m for m in members if m.member_id == m.leader)
    b, c = (m for m in members if m is not leader)
    lref = d.request(join_body(G, leader.member_id))
    bref = d.request(join_body(G, b.member_id))
    start = d.now
    # c stays alive but never rejoins, so the join waits for the rebalance timeout.
    for _ in range(3):
        d.advance(5_000)
        heartbeat(d, c.member_id, 1)
    d.advance_to(start + REBALANCE - SESSION)
    heartbeat(d, c.member_id, 1)
    # b's session now ends exactly when the join completes (and reschedules it).
    assert heartbeat(d, b.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert d.shard.timer_deadline(heartbeat_timer(G, b.member_id)) == start + REBALANCE
    assert d.shard.timer_deadline(join_timer(G)) == start + REBALANCE
    d.advance_to(start + REBALANCE)
    assert d.join_response(lref).generation_id == 2
    assert d.join_response(bref).generation_id == 2
    group = d.shard.group(G)
    assert group is not None and set(group.members) == {leader.member_id, b.member_id}
    assert d.state(G) is GroupState.COMPLETING_REBALANCE
