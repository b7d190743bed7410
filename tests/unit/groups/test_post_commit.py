"""The classic group's move to Stable waits for the leader's snapshot to be durable.

Kafka chains this step on the SyncGroup append future; here it is a post-commit action on
the handler's result. These tests hold the append open (the runtime would be waiting for
``acks=all``) and look at the group in between.
"""

from __future__ import annotations

from kafkacoord.codecs.models import GroupMetadataKey
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef, Result, replay_result

from .groupdriver import Driver, join_body, leader_assignment

G = "g"


def _joined(d: Driver, n: int) -> list[api.JoinGroupResponse]:
    ids = [d.new_member_id(G) for _ in range(n)]
    refs = [d.request(join_body(G, mid)) for mid in ids]
    d.advance(d.config.initial_rebalance_delay_ms * (n + 1))
    return [d.join_response(ref) for ref in refs]


def _sync(
    d: Driver, response: api.JoinGroupResponse, assignments: list[api.SyncAssignment], corr: int
) -> tuple[RequestRef, Result]:
    """Handle a SyncGroup as the runtime does, but leave its append unacknowledged."""
    ref = RequestRef("client", 10_000 + corr)
    body = api.SyncGroup(
        group_id=G,
        generation_id=response.generation_id,
        member_id=response.member_id,
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignments=assignments,
    )
    return ref, replay_result(d.shard, d.shard.handle(Request(ref, "SyncGroup", body), d.now))


def test_the_group_is_stable_only_once_the_assignment_is_durable() -> None:
    d = Driver()
    responses = _joined(d, 2)
    leader = next(r for r in responses if r.member_id == r.leader)
    follower = next(r for r in responses if r.member_id != r.leader)
    plan = leader_assignment(leader, {"t": 4}, "range")

    leader_ref, written = _sync(d, leader, plan, 1)
    [record] = written.records
    assert record.key == GroupMetadataKey(G) and record.in_memory
    assert written.actions, "the move to Stable must wait for the append"
    # Appended but not acknowledged: still completing, and nothing reached the members.
    assert d.state(G) is GroupState.COMPLETING_REBALANCE
    group = d.shard.group(G)
    assert group is not None and all(m.assignment == b"" for m in group.members.values())

    # The follower syncs while the append is in flight: it is parked, not answered.
    follower_ref, parked = _sync(d, follower, [], 2)
    assert not parked.records and not parked.replies

    replies = written.committed()
    assert d.state(G) is GroupState.STABLE
    by_ref = {r.to: r for r in replies}
    assert set(by_ref) == {leader_ref, follower_ref}
    given = {a.member_id: a.assignment for a in plan}
    for ref, member in ((leader_ref, leader), (follower_ref, follower)):
        reply = by_ref[ref]
        assert reply.error is ErrorCode.NONE
        assert isinstance(reply.body, api.SyncGroupResponse)
        assert reply.body.assignment == given[member.member_id]
        assert group.members[member.member_id].assignment == given[member.member_id]


def test_a_rebalance_begun_before_the_append_lands_supersedes_it() -> None:
    d = Driver()
    responses = _joined(d, 2)
    leader = next(r for r in responses if r.member_id == r.leader)
    _, written = _sync(d, leader, leader_assignment(leader, {"t": 4}, "range"), 1)

    # A third member joins while the snapshot is in flight: the group rebalances.
    newcomer = d.new_member_id(G)
    d.request(join_body(G, newcomer))
    assert d.state(G) is GroupState.PREPARING_REBALANCE

    written.committed()
    # The durable snapshot no longer describes the group: it stays rebalancing.
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    group = d.shard.group(G)
    assert group is not None and group.persisted is not None
    assert group.persisted.generation == leader.generation_id
