"""Full join/sync rounds through the shard with Kafka's real assignors run by the leader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kafkacoord.coordinator.groups.assignors import ASSIGNORS
from kafkacoord.coordinator.groups.consumer_protocol import decode_assignment
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import group_api as api

from .groupdriver import Driver, join_body, sub

G = "g"
PARTITIONS = {"orders": 5, "payments": 3}
TOPICS = ("orders", "payments")

TP = tuple[str, int]


def check_complete(owned: Mapping[str, Sequence[TP]]) -> None:
    every = [tp for tps in owned.values() for tp in tps]
    assert len(every) == len(set(every)), "a partition is assigned twice"
    assert set(every) == {(t, p) for t, n in PARTITIONS.items() for p in range(n)}


def rebalance_round(
    d: Driver,
    owned: Mapping[str, Sequence[TP]],
    generation: int,
    assignor: str,
    *,
    newcomers: int = 0,
) -> dict[str, list[TP]]:
    """Existing members rejoin advertising what they own (KIP-429), newcomers join; the
    leader assigns with ``assignor``; returns member -> assigned partitions."""

    def body(member_id: str, mine: Sequence[TP]) -> api.JoinGroup:
        proto = api.JoinProtocol(
            name=assignor, metadata=sub(*TOPICS, owned=mine, generation=generation)
        )
        return join_body(G, member_id, protos=[proto])

    group = d.shard.group(G)
    assert group is not None
    refs = []
    # Newcomers, or else the leader, start the rebalance of a Stable group.
    for _ in range(newcomers):
        mid = d.new_member_id(G, names=(assignor,), topics=TOPICS)
        refs.append(d.request(body(mid, [])))
    for member_id in sorted(owned, key=lambda m: m != group.leader):
        refs.append(d.request(body(member_id, owned[member_id])))
    responses = [d.join_response(r) for r in refs]
    assert {r.generation_id for r in responses} == {generation + 1}
    members = d.sync_all(G, responses, PARTITIONS, assignor)
    assert d.state(G) is GroupState.STABLE
    return {m.member_id: m.assignment for m in members}


@pytest.mark.parametrize("assignor", sorted(ASSIGNORS))
def test_four_members_every_partition_once(assignor: str) -> None:
    d = Driver()
    members = d.form_group(G, 4, partitions=PARTITIONS, assignor=assignor, topics=TOPICS)
    owned = {m.member_id: m.assignment for m in members}
    check_complete(owned)
    sizes = sorted(len(v) for v in owned.values())
    assert sizes[-1] - sizes[0] <= 1 or assignor == "range"
    # The durable record holds the same assignments.
    group = d.shard.group(G)
    assert group is not None and group.persisted is not None
    for m in group.persisted.members:
        assert sorted(decode_assignment(m.assignment).partitions) == owned[m.member_id]


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_sticky_keeps_assignments_when_a_member_leaves(assignor: str) -> None:
    d = Driver()
    members = d.form_group(G, 3, partitions=PARTITIONS, assignor=assignor, topics=TOPICS)
    owned = {m.member_id: m.assignment for m in members}
    gone = next(m for m in owned if m != members[0].leader)
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=gone)]))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    survivors = {m: tps for m, tps in owned.items() if m != gone}
    after = rebalance_round(d, survivors, 1, assignor)
    check_complete(after)
    for member_id, before in survivors.items():
        assert set(before) <= set(after[member_id]), "a survivor lost a partition"


def test_cooperative_sticky_newcomer_gets_partitions_in_a_second_round() -> None:
    d = Driver()
    assignor = "cooperative-sticky"
    members = d.form_group(G, 2, partitions=PARTITIONS, assignor=assignor, topics=TOPICS)
    owned = {m.member_id: m.assignment for m in members}
    check_complete(owned)
    # Round 1: a newcomer joins. Partitions still owned elsewhere are only revoked.
    first = rebalance_round(d, owned, 1, assignor, newcomers=1)
    newcomer = next(m for m in first if m not in owned)
    assert first[newcomer] == []
    revoked = {m: set(owned[m]) - set(first[m]) for m in owned}
    assert any(revoked.values())
    # Round 2: the members that revoked rejoin; the newcomer gets what was revoked.
    second = rebalance_round(d, first, 2, assignor)
    check_complete(second)
    assert set(second[newcomer]) == set().union(*revoked.values())
    sizes = sorted(len(v) for v in second.values())
    assert sizes[-1] - sizes[0] <= 1


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_eager_rebalance_after_join_is_complete(assignor: str) -> None:
    d = Driver()
    members = d.form_group(G, 2, partitions=PARTITIONS, assignor=assignor, topics=TOPICS)
    owned = {m.member_id: [] for m in members}  # eager: everything revoked before rejoining
    after = rebalance_round(d, owned, 1, assignor, newcomers=2)
    assert len(after) == 4
    check_complete(after)
