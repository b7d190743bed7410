"""GroupShard: static membership (group.instance.id, KIP-345)."""

from __future__ import annotations

from kafkacoord.codecs.models import GroupMetadataValue
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api

from .groupdriver import DELAY, SESSION, Driver, commit_body, join_body

G = "g"


def stable_static(d: Driver, n: int = 2, **kw: object) -> list[str]:
    members = d.form_group(G, n, instances=[f"i-{k}" for k in range(n)], **kw)  # type: ignore[arg-type]
    return [m.member_id for m in members]


def test_static_members_get_ids_without_member_id_required() -> None:
    d = Driver()
    ref = d.request(join_body(G, instance="i-0"))
    d.advance(DELAY)
    resp = d.join_response(ref)
    assert resp.member_id == "i-0-1"  # prefixed by the instance id, as in Kafka
    group = d.shard.group(G)
    assert group is not None and group.static_members == {"i-0": "i-0-1"}


def test_static_follower_rejoin_replaces_member_id_without_rebalance() -> None:
    d = Driver()
    ids = stable_static(d)
    group = d.shard.group(G)
    assert group is not None
    leader = group.leader
    follower_idx = 0 if ids[0] != leader else 1
    old_id = ids[follower_idx]
    instance = f"i-{follower_idx}"
    records_before = len(d.log)

    resp = d.join_response(d.request(join_body(G, instance=instance)))
    new_id = resp.member_id
    assert new_id != old_id
    assert resp.generation_id == 1 and resp.leader == leader and resp.members == []
    assert not resp.skip_assignment
    assert d.state(G) is GroupState.STABLE  # no rebalance
    assert group.static_members[instance] == new_id
    assert old_id not in group.members
    # The replacement is persisted.
    assert len(d.log) == records_before + 1
    value = d.log[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert new_id in {m.member_id for m in value.members}
    assert old_id not in {m.member_id for m in value.members}
    # The new id gets the old assignment.
    sync = d.call(api.SyncGroup(group_id=G, generation_id=1, member_id=new_id))
    assert sync.error is ErrorCode.NONE
    assert isinstance(sync.body, api.SyncGroupResponse) and sync.body.assignment
    # The old incarnation is fenced.
    for body in (
        api.Heartbeat(group_id=G, generation_id=1, member_id=old_id, group_instance_id=instance),
        api.SyncGroup(group_id=G, generation_id=1, member_id=old_id, group_instance_id=instance),
    ):
        assert d.call(body).error is ErrorCode.FENCED_INSTANCE_ID
    commit = commit_body(G, {("t", 0): 1}, member_id=old_id, generation=1, instance=instance)
    assert d.call(commit).error is ErrorCode.FENCED_INSTANCE_ID
    assert d.call(join_body(G, old_id, instance=instance)).error is ErrorCode.FENCED_INSTANCE_ID
    # Without the instance id, the old member id is simply unknown.
    hb = api.Heartbeat(group_id=G, generation_id=1, member_id=old_id)
    assert d.call(hb).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_static_leader_rejoin_learns_it_leads_but_skips_assignment() -> None:
    d = Driver()
    ids = stable_static(d)
    group = d.shard.group(G)
    assert group is not None
    leader_idx = ids.index(group.leader or "")
    resp = d.join_response(d.request(join_body(G, instance=f"i-{leader_idx}")))
    assert resp.leader == resp.member_id and resp.skip_assignment
    assert len(resp.members) == 2
    assert group.leader == resp.member_id
    assert d.state(G) is GroupState.STABLE


def test_static_rejoin_changing_selected_protocol_rebalances() -> None:
    d = Driver()
    names = ("range", "roundrobin")
    refs = [d.request(join_body(G, instance=f"i-{k}", names=names)) for k in range(2)]
    d.advance(2 * DELAY)
    assert {d.join_response(r).protocol_name for r in refs} == {"range"}
    d.sync_all(G, [d.join_response(r) for r in refs], {"t": 2}, "range", ["i-0", "i-1"])
    assert d.state(G) is GroupState.STABLE
    ref = d.request(join_body(G, instance="i-0", names=("roundrobin",)))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert d.reply(ref) is None


def test_static_rejoin_during_completing_rebalance_rebalances_and_fences_old_sync() -> None:
    d = Driver()
    refs = [d.request(join_body(G, instance=f"i-{k}")) for k in range(2)]
    d.advance(2 * DELAY)
    resps = [d.join_response(r) for r in refs]
    follower = next(r for r in resps if r.member_id != r.leader)
    idx = resps.index(follower)
    fsync = d.request(
        api.SyncGroup(
            group_id=G,
            generation_id=1,
            member_id=follower.member_id,
            group_instance_id=f"i-{idx}",
        )
    )
    new = d.request(join_body(G, instance=f"i-{idx}"))
    reply = d.reply(fsync)
    assert reply is not None and reply.error is ErrorCode.FENCED_INSTANCE_ID
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    assert d.reply(new) is None
    # The leader rejoins: everyone is in, next generation.
    leader_join = d.request(join_body(G, resps[1 - idx].member_id, instance=f"i-{1 - idx}"))
    assert d.join_response(leader_join).generation_id == 2
    assert d.join_response(new).generation_id == 2


def test_static_rejoin_during_preparing_rebalance_fences_parked_join() -> None:
    d = Driver()
    ids = stable_static(d)
    group = d.shard.group(G)
    assert group is not None
    leader_idx = ids.index(group.leader or "")
    other = 1 - leader_idx
    # The follower changes its subscription: rebalance, its JoinGroup is parked.
    old_join = d.request(join_body(G, ids[other], instance=f"i-{other}", topics=("t", "u")))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    new_join = d.request(join_body(G, instance=f"i-{other}"))
    reply = d.reply(old_join)
    assert reply is not None and reply.error is ErrorCode.FENCED_INSTANCE_ID
    assert d.reply(new_join) is None
    lj = d.request(join_body(G, ids[leader_idx], instance=f"i-{leader_idx}"))
    assert d.join_response(lj).generation_id == 2
    assert d.join_response(new_join).generation_id == 2


def test_static_member_known_id_but_unknown_instance() -> None:
    d = Driver()
    ids = stable_static(d)
    reply = d.call(join_body(G, ids[0], instance="i-unknown"))
    assert reply.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_dynamic_id_with_instance_id_is_invalid() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    assert d.call(join_body(G, mid, instance="i-9")).error is ErrorCode.INVALID_REQUEST


def test_static_member_not_rejoining_is_kept_until_its_session_expires() -> None:
    d = Driver()
    ids = stable_static(d)
    group = d.shard.group(G)
    assert group is not None
    leader_idx = ids.index(group.leader or "")
    lj = d.request(join_body(G, ids[leader_idx], instance=f"i-{leader_idx}"))
    # The other static member is down: at the rebalance timeout it stays (static), but
    # its session timeout (shorter) removed it already.
    d.advance(SESSION)
    resp = d.join_response(lj)
    assert resp.generation_id == 2
    assert [m.member_id for m in resp.members] == [ids[leader_idx]]


def test_static_member_survives_rebalance_timeout_when_heartbeating() -> None:
    d = Driver()
    ids = stable_static(d, session=60_000, rebalance=20_000)
    group = d.shard.group(G)
    assert group is not None
    leader_idx = ids.index(group.leader or "")
    other = ids[1 - leader_idx]
    lj = d.request(join_body(G, ids[leader_idx], instance=f"i-{leader_idx}", rebalance=20_000))
    d.advance(20_000)
    # Join completed without the static member that did not rejoin; it is still a member.
    resp = d.join_response(lj)
    assert resp.generation_id == 2 and other in group.members
    assert len(resp.members) == 2


def test_static_replacement_survives_reload() -> None:
    d = Driver()
    stable_static(d)
    resp = d.join_response(d.request(join_body(G, instance="i-1")))
    loaded = d.reload()
    group = loaded.group(G)
    assert group is not None and group.state is GroupState.STABLE
    assert group.static_members["i-1"] == resp.member_id
    assert loaded.describe_group(G) == d.snapshot(G)
