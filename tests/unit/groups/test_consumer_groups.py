"""KIP-848 consumer groups on a GroupShard: epochs, reconciliation, timeouts, static
members, metadata changes, offsets and loading (a fake clock, no I/O)."""

from __future__ import annotations

import random

import pytest

from kafkacoord.codecs.models import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    MemberState,
    SubscribedTopic,
)
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.consumer import ConsumerGroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api

from .consumerdriver import (
    REBALANCE,
    Consumer,
    assert_single_owners,
    consumer_group,
    converge,
    hinted,
    state_of,
    topics_image,
)
from .groupdriver import Driver, commit_body, partition_errors

G = "orders-app"


def driver_with(config: GroupConfig | None = None, **topics: int) -> Driver:
    d = Driver(config)
    d.apply(d.shard.on_topics(topics_image(**(topics or {"t": 6})), d.now))
    return d


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    d = driver_with(t=6)
    a = Consumer(d, G, "a")
    body = a.ok()
    assert body.member_epoch == 1 and body.heartbeat_interval_ms == 5_000
    assert a.owned == {"t": set(range(6))}
    group = consumer_group(d, G)
    assert group.state is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    assert {type(r.key) for r in d.log} >= {ConsumerGroupMetadataKey,
                                            ConsumerGroupCurrentMemberAssignmentKey}  # fmt: skip
    # A plain heartbeat changes nothing and repeats no assignment.
    body = a.ok()
    assert body.assignment is None and body.member_epoch == 1


def test_a_join_revokes_before_it_assigns() -> None:
    d = driver_with(t=6)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b_first = b.ok()
    group = consumer_group(d, G)
    assert group.group_epoch == 2
    # b's target partitions are still a's: b is at epoch 2 but gets nothing yet.
    assert b_first.member_epoch == 2 and b.owned == {}
    assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a must give up three partitions before anything moves; it stays at epoch 1.
    a_body = a.ok()
    assert a_body.member_epoch == 1 and len(a.owned["t"]) == 3
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert_single_owners([a, b])
    # b asks again while a has not confirmed: still nothing.
    assert not b.owned_set() and b.ok().assignment is None
    # a confirms the revocation; then b gets the released partitions.
    assert a.ok().member_epoch == 2
    b.ok()
    assert len(b.owned["t"]) == 3 and not (a.owned["t"] & b.owned["t"])
    assert group.state is ConsumerGroupState.STABLE


def test_three_members_converge_with_single_owners_at_every_step() -> None:
    d = driver_with(t=7, u=5)
    members = [Consumer(d, G, f"m{i}", topics=("t", "u")) for i in range(3)]
    for i, m in enumerate(members):
        m.ok()
        converge(members[: i + 1])
    owned = [m.owned_set() for m in members]
    assert set().union(*owned) == {("t", p) for p in range(7)} | {("u", p) for p in range(5)}
    assert max(map(len, owned)) - min(map(len, owned)) <= 1
    assert consumer_group(d, G).state is ConsumerGroupState.STABLE


def test_a_lost_response_is_forgiven_but_a_stale_epoch_is_fenced() -> None:
    d = driver_with(t=4)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    a.ok()  # revokes at epoch 1
    a.ok()  # epoch 2
    # The response carrying epoch 2 was lost: epoch 1 with a subset of the assignment passes.
    a.epoch = 1
    assert a.ok().member_epoch == 2
    # Epoch 1 reporting partitions it no longer has is fenced.
    a.epoch = 1
    a.owned = {"t": {0, 1, 2, 3}}
    reply = a.heartbeat()
    assert reply.error is ErrorCode.FENCED_MEMBER_EPOCH
    # An epoch from the future too.
    a.epoch = 9
    assert a.heartbeat().error is ErrorCode.FENCED_MEMBER_EPOCH
    # The fenced member rejoins with epoch 0 and gets its partitions back.
    a.epoch, a.owned = 0, {}
    body = a.ok()
    assert body.member_epoch == 2 and body.assignment is not None


def test_session_timeout_removes_a_silent_member() -> None:
    d = driver_with(t=4)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    converge([a, b])
    d.advance(30_000)
    a.ok()  # only a heartbeats
    d.advance(20_000)  # b's 45 s session is over, a's is not
    group = consumer_group(d, G)
    assert set(group.members) == {"a"} and group.group_epoch == 3
    a.ok()
    assert a.owned == {"t": {0, 1, 2, 3}}
    assert b.heartbeat().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_never_revokes() -> None:
    d = driver_with(t=4)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    a.ok()  # asked to revoke two partitions
    assert consumer_group(d, G).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    d.advance(REBALANCE - 1)
    b.ok()
    assert "a" in consumer_group(d, G).members
    d.advance(1)
    assert set(consumer_group(d, G).members) == {"b"}
    b.ok()
    assert b.owned == {"t": {0, 1, 2, 3}}


def test_leaving_frees_partitions_and_bumps_the_epoch() -> None:
    d = driver_with(t=4)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    converge([a, b])
    reply = a.heartbeat(member_epoch=-1) if False else None
    a.epoch = -1
    reply = a.heartbeat()
    assert reply.error is ErrorCode.NONE
    assert isinstance(reply.body, api.ConsumerGroupHeartbeatResponse)
    assert reply.body.member_epoch == -1
    b.ok()
    assert b.owned == {"t": {0, 1, 2, 3}}
    assert (ConsumerGroupCurrentMemberAssignmentKey(G, "a"), None) in [
        (r.key, r.value) for r in d.log
    ]


def test_static_member_leaves_for_a_while_and_comes_back_without_a_rebalance() -> None:
    d = driver_with(t=4)
    a = Consumer(d, G, "a1", instance="host-a")
    b = Consumer(d, G, "b")
    a.ok()
    b.ok()
    converge([a, b])
    kept = a.owned_set()
    epoch = consumer_group(d, G).group_epoch
    a.epoch = -2
    assert a.heartbeat().error is ErrorCode.NONE
    b.ok()
    assert consumer_group(d, G).group_epoch == epoch  # nothing moved to b
    # The instance comes back under a new member id and gets its partitions again.
    back = Consumer(d, G, "a2", instance="host-a")
    body = back.ok()
    assert back.owned_set() == kept and consumer_group(d, G).group_epoch == epoch
    assert body.member_id == "a2" and "a1" not in consumer_group(d, G).members
    # A second process with the same instance id while a2 is active is refused.
    other = Consumer(d, G, "a3", instance="host-a")
    assert other.heartbeat().error is ErrorCode.UNRELEASED_INSTANCE_ID
    # The old member id is fenced out of the instance.
    a.epoch, a.member_id = 1, "a1"
    assert a.heartbeat().error is ErrorCode.FENCED_INSTANCE_ID


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"member_id": ""}, ErrorCode.INVALID_REQUEST),
        ({"group_id": ""}, ErrorCode.INVALID_GROUP_ID),
        ({"instance_id": ""}, ErrorCode.INVALID_REQUEST),
        ({"rack_id": ""}, ErrorCode.INVALID_REQUEST),
        ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
        ({"subscribed_topic_names": []}, ErrorCode.INVALID_REQUEST),
        ({"topic_partitions": [api.HeartbeatTopicPartitions(topic="t", partitions=[0])]},
         ErrorCode.INVALID_REQUEST),
        ({"member_epoch": -3}, ErrorCode.INVALID_REQUEST),
        ({"server_assignor": "roundrobin"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
        ({"subscribed_topic_regex": "orders-("}, ErrorCode.INVALID_REGULAR_EXPRESSION),
        ({"member_epoch": 3}, ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)  # fmt: skip
def test_invalid_heartbeats_get_clear_errors_and_write_nothing(
    overrides: dict[str, object], code: ErrorCode
) -> None:
    d = driver_with(t=2)
    body = {
        "group_id": G,
        "member_id": "m",
        "member_epoch": 0,
        "rebalance_timeout_ms": REBALANCE,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
        **overrides,
    }
    before = len(d.log)
    reply = d.call(api.ConsumerGroupHeartbeat(**body))  # type: ignore[arg-type]
    assert reply.error is code and reply.message
    assert len(d.log) == before and d.shard.consumer_group(G) is None


def test_group_max_size() -> None:
    d = driver_with(GroupConfig(consumer_max_size=2), t=4)
    Consumer(d, G, "a").ok()
    Consumer(d, G, "b").ok()
    reply = Consumer(d, G, "c").heartbeat()
    assert reply.error is ErrorCode.GROUP_MAX_SIZE_REACHED and "2 members" in (reply.message or "")


def test_new_partitions_bump_the_epoch_and_reach_the_members() -> None:
    d = driver_with(t=2)
    a = Consumer(d, G, "a")
    a.ok()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    assert consumer_group(d, G).group_epoch == 2
    assert a.ok().member_epoch == 2 and a.owned == {"t": {0, 1, 2, 3}}
    # The same metadata again changes nothing.
    logged = len(d.log)
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    assert len(d.log) == logged


def test_regex_subscription_follows_new_topics() -> None:
    d = driver_with(**{"orders-eu": 2, "payments": 2})
    a = Consumer(d, G, "a", topics=())
    body = a.ok(subscribed_topic_names=[], subscribed_topic_regex="orders-.*")
    assert body.member_epoch == 1 and a.owned == {"orders-eu": {0, 1}}
    d.apply(d.shard.on_topics(topics_image(**{"orders-eu": 2, "orders-us": 1, "payments": 2}),
                              d.now))  # fmt: skip
    a.ok()
    assert a.owned == {"orders-eu": {0, 1}, "orders-us": {0}}


def test_dropping_a_topic_from_the_subscription_revokes_it() -> None:
    d = driver_with(t=2, u=2)
    a = Consumer(d, G, "a", topics=("t", "u"))
    a.ok()
    assert set(a.owned) == {"t", "u"}
    a.topics = ("t",)
    a.ok(subscribed_topic_names=["t"])
    assert a.owned == {"t": {0, 1}}


def test_server_assignor_range_is_co_partitioned() -> None:
    d = driver_with(t=3, u=3)
    a = Consumer(d, G, "a", topics=("t", "u"))
    b = Consumer(d, G, "b", topics=("t", "u"))
    a.ok(server_assignor="range")
    b.ok(server_assignor="range")
    converge([a, b])
    assert a.owned == {"t": {0, 1}, "u": {0, 1}} and b.owned == {"t": {2}, "u": {2}}
    assert d.call(api.ConsumerGroupDescribe(group_ids=[G])).body.groups[0].assignor_name == (  # type: ignore[union-attr]
        "range"
    )


def test_offset_commits_check_the_member_epoch() -> None:
    d = driver_with(t=2)
    a = Consumer(d, G, "a")
    a.ok()
    ok = d.call(commit_body(G, {("t", 0): 5}, member_id="a", generation=1))
    assert partition_errors(ok) == {("t", 0): ErrorCode.NONE}
    stale = d.call(commit_body(G, {("t", 0): 6}, member_id="a", generation=0))
    assert stale.error is ErrorCode.STALE_MEMBER_EPOCH
    unknown = d.call(commit_body(G, {("t", 0): 6}, member_id="zz", generation=1))
    assert unknown.error is ErrorCode.UNKNOWN_MEMBER_ID
    # An admin reset (-1) is refused while the group has members, accepted once empty.
    admin = d.call(commit_body(G, {("t", 0): 0}))
    assert admin.error is ErrorCode.UNKNOWN_MEMBER_ID
    a.epoch = -1
    a.ok()
    admin = d.call(commit_body(G, {("t", 0): 0}))
    assert partition_errors(admin) == {("t", 0): ErrorCode.NONE}
    assert d.shard.committed_offsets(G)[("t", 0)].offset == 0


def test_admin_apis_see_consumer_groups() -> None:
    d = driver_with(t=2)
    a = Consumer(d, G, "a")
    a.ok()
    listed = d.call(api.ListGroups()).body
    assert isinstance(listed, api.ListGroupsResponse)
    assert [(g.group_id, g.group_type, g.state) for g in listed.groups] == [
        (G, "consumer", "Stable")
    ]
    described = d.call(api.ConsumerGroupDescribe(group_ids=[G, "nope"])).body
    assert isinstance(described, api.ConsumerGroupDescribeResponse)
    group, missing = described.groups
    assert (group.state, group.group_epoch, group.assignor_name) == ("Stable", 1, "uniform")
    expected = [api.HeartbeatTopicPartitions(topic="t", partitions=[0, 1])]
    assert group.members[0].assignment == expected
    assert missing.error is ErrorCode.GROUP_ID_NOT_FOUND
    classic = d.call(api.DescribeGroups(groups=[G])).body
    assert isinstance(classic, api.DescribeGroupsResponse)
    assert classic.groups[0].error is ErrorCode.GROUP_ID_NOT_FOUND
    deleted = d.call(api.DeleteGroups(groups=[G])).body
    assert isinstance(deleted, api.DeleteGroupsResponse)
    assert deleted.results[0].error is ErrorCode.NON_EMPTY_GROUP
    a.epoch = -1
    a.ok()
    d.call(commit_body(G, {("t", 0): 3}))
    deleted = d.call(api.DeleteGroups(groups=[G])).body
    assert isinstance(deleted, api.DeleteGroupsResponse)
    assert deleted.results[0].error is ErrorCode.NONE
    assert d.shard.consumer_group(G) is None and not d.shard.committed_offsets(G)
    assert d.reload().consumer_group(G) is None


def test_an_empty_classic_group_gives_its_id_and_offsets_to_a_consumer_group() -> None:
    d = driver_with(t=2)
    # Offsets committed without membership: the consumer group takes the id and keeps them.
    d.call(commit_body("simple", {("t", 1): 7}))
    Consumer(d, "simple", "m").ok()
    assert d.shard.consumer_group("simple") is not None and d.shard.group("simple") is None
    assert d.shard.committed_offsets("simple")[("t", 1)].offset == 7
    reloaded = d.reload()
    assert reloaded.consumer_group("simple") is not None and reloaded.group("simple") is None


def test_offsets_of_subscribed_topics_never_expire() -> None:
    config = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    d = driver_with(config, t=2, gone=1)
    a = Consumer(d, G, "a")
    a.ok()
    d.call(commit_body(G, {("t", 0): 1, ("gone", 0): 1}, member_id="a", generation=1))
    for _ in range(10):
        d.advance(10_000)
        a.ok()
    offsets = d.shard.committed_offsets(G)
    assert ("t", 0) in offsets and ("gone", 0) not in offsets


def test_loading_restores_groups_mid_rebalance_in_any_order() -> None:
    d = driver_with(t=5, u=3)
    members = [Consumer(d, G, f"m{i}", topics=("t", "u")) for i in range(3)]
    members[0].ok()
    members[1].ok()
    members[0].ok()  # revoking
    members[2].ok(server_assignor="uniform")
    static = Consumer(d, G, "s1", topics=("u",), instance="inst")
    static.ok()
    live = state_of(consumer_group(d, G))
    assert consumer_group(d, G).state is ConsumerGroupState.RECONCILING

    # The whole log in order, or the compacted log in any order.
    shuffled = d.folded()
    random.Random(7).shuffle(shuffled)
    for order in (d.log, d.folded(), shuffled):
        fresh = d.reload(order)
        group = fresh.consumer_group(G)
        assert group is not None and state_of(group) == live

    # The new leader carries on: the same members converge, each partition owned once.
    converge([*members, static])
    assert consumer_group(d, G).state is ConsumerGroupState.STABLE


def test_target_records_are_written_only_for_members_whose_target_changed() -> None:
    d = driver_with(t=6)
    a, b = Consumer(d, G, "a", topics=("t",)), Consumer(d, G, "b", topics=("t",))
    a.ok()
    b.ok()
    converge([a, b])
    start = len(d.log)
    c = Consumer(d, G, "c", topics=("other",))  # subscribes to a topic that does not exist
    c.ok()
    target_key = ConsumerGroupTargetAssignmentMemberKey
    written = {r.key for r in d.log[start:] if isinstance(r.key, target_key)}
    assert written == {ConsumerGroupTargetAssignmentMemberKey(G, "c")}
    assert c.owned == {}


def test_static_member_session_expiry_hands_its_partitions_over() -> None:
    d = driver_with(t=2)
    a = Consumer(d, G, "a1", instance="host-a")
    b = Consumer(d, G, "b")
    a.ok()
    b.ok()
    converge([a, b])
    a.epoch = -2
    a.heartbeat()
    for _ in range(6):
        d.advance(10_000)
        b.ok()
    assert set(consumer_group(d, G).members) == {"b"}
    assert b.owned == {"t": {0, 1}}


def test_subscribed_topic_without_metadata_assigns_nothing_until_it_appears() -> None:
    d = Driver()
    a = Consumer(d, G, "a")
    assert a.ok().member_epoch == 1 and a.owned == {}
    d.apply(d.shard.on_topics({"t": SubscribedTopic("t", 2)}, d.now))
    a.ok()
    assert a.owned == {"t": {0, 1}}


def test_hints_go_to_the_members_an_event_lets_move_on() -> None:
    d = driver_with(t=4)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    assert hinted(d) == []
    mark = len(d.replies)
    b.ok()  # a new target epoch: a must revoke, so a is hinted (b got its answer)
    assert hinted(d, mark) == ["a"]
    mark = len(d.replies)
    a.ok()  # a is asked to revoke: nothing released yet, nobody hinted
    assert hinted(d, mark) == []
    mark = len(d.replies)
    a.ok()  # a released two partitions: b, waiting for them, is hinted
    assert hinted(d, mark) == ["b"]
    mark = len(d.replies)
    b.ok()
    b.ok()  # a plain heartbeat of a stable group hints nobody
    assert hinted(d, mark) == [] and consumer_group(d, G).state is ConsumerGroupState.STABLE
    # A member that leaves: the others must take its partitions.
    mark = len(d.replies)
    b.epoch = -1
    b.ok()
    assert hinted(d, mark) == ["a"]
    # Hints are pushes: they are not kept as answers to requests.
    assert all(r.to.correlation_id >= 0 for r in d.replies if r.body is not None
               and not isinstance(r.body, api.ConsumerGroupHint))  # fmt: skip
