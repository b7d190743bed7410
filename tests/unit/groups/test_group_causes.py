"""Group records name what started their rebalance: the classic state machine records a
cause where a rebalance starts and writes it in the snapshot the rebalance produces; a
consumer group's epoch record names what bumped it. Replay ignores causes."""

from __future__ import annotations

import dataclasses

from kafkacoord.codecs.models import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    GroupCause,
    GroupCauseKind,
    GroupMetadataValue,
)
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record

from .consumerdriver import Consumer, consumer_group, topics_image
from .groupdriver import SESSION, Driver, join_body

G = "orders-app"


def snapshots(d: Driver, since: int = 0) -> list[GroupMetadataValue]:
    return [r.value for r in d.log[since:] if isinstance(r.value, GroupMetadataValue)]


def epochs(d: Driver, since: int = 0) -> list[ConsumerGroupMetadataValue]:
    return [r.value for r in d.log[since:] if isinstance(r.key, ConsumerGroupMetadataKey)
            and isinstance(r.value, ConsumerGroupMetadataValue)]  # fmt: skip


def test_the_first_generation_names_the_member_that_joined() -> None:
    d = Driver()
    [m] = d.form_group(G, 1)
    [first] = snapshots(d)
    assert first.generation == 1
    assert first.cause == GroupCause(GroupCauseKind.MEMBER_JOINED, member_id=m.member_id,
                                     client_id="client", client_host="/127.0.0.1")  # fmt: skip


def test_a_member_that_leaves_is_the_next_generations_cause() -> None:
    d = Driver()
    a, b = d.form_group(G, 2)
    mark = len(d.log)
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=b.member_id)]))
    # The rebalance completes once the other member rejoins; its leader then syncs.
    ref = d.request(join_body(G, a.member_id))
    response = d.join_response(ref)
    d.sync_all(G, [response], {"t": 3})
    [after] = snapshots(d, mark)
    assert after.generation == 2 and [m.member_id for m in after.members] == [a.member_id]
    assert after.cause is not None and after.cause.kind == GroupCauseKind.MEMBER_LEFT
    assert after.cause.member_id == b.member_id and after.cause.client_id == "client"


def test_an_expired_session_is_the_cause_of_the_group_left_empty() -> None:
    d = Driver()
    [m] = d.form_group(G, 1)
    mark = len(d.log)
    d.advance(SESSION + 1)
    [empty] = snapshots(d, mark)
    assert empty.members == () and empty.generation == 2
    assert empty.cause is not None and empty.cause.kind == GroupCauseKind.MEMBER_EXPIRED
    assert empty.cause.member_id == m.member_id
    assert empty.cause.detail == f"no heartbeat in its {SESSION} ms session"


def test_a_changed_subscription_is_named_and_a_plain_rejoin_is_not_one() -> None:
    d = Driver()
    _, b = d.form_group(G, 2)
    group = d.shard.group(G)
    assert group is not None
    d.request(join_body(G, b.member_id, topics=("t", "u")))
    assert group.rebalance_cause is not None
    assert group.rebalance_cause.kind == GroupCauseKind.SUBSCRIPTION_CHANGED
    assert group.rebalance_cause.member_id == b.member_id

    d2 = Driver()
    leader = next(m for m in d2.form_group(G, 2) if m.member_id == m.leader)
    d2.request(join_body(G, leader.member_id))  # the leader rejoins, same metadata
    group2 = d2.shard.group(G)
    assert group2 is not None and group2.rebalance_cause is not None
    assert group2.rebalance_cause.kind == GroupCauseKind.MEMBER_REJOINED


def test_a_lowered_size_limit_is_the_cause_after_a_load() -> None:
    d = Driver()
    d.form_group(G, 3)
    smaller = Driver(GroupConfig(max_size=2), load=False)
    for record in d.log:
        smaller.shard.replay(record)
    smaller.apply(smaller.shard.on_loaded(smaller.now))
    group = smaller.shard.group(G)
    assert group is not None and group.rebalance_cause == GroupCause(
        GroupCauseKind.GROUP_MAX_SIZE_EXCEEDED, detail="3 members, limit 2"
    )


def test_causes_do_not_change_what_a_load_rebuilds() -> None:
    d = Driver()
    d.form_group(G, 2)
    assert all(s.cause is not None for s in snapshots(d))
    stripped = [
        Record(r.key, dataclasses.replace(r.value, cause=None))
        if isinstance(r.value, GroupMetadataValue)
        else r
        for r in d.log
    ]
    assert d.reload().describe_group(G) == d.reload(stripped).describe_group(G)
    assert d.reload().describe_group(G) == d.snapshot(G)


# --------------------------------------------------------------------------- consumer protocol


def driver_with(**topics: int) -> Driver:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(**topics), d.now))
    return d


def test_a_consumer_groups_epochs_name_a_join_a_leave_and_a_subscription() -> None:
    d = driver_with(t=6, u=2)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    joined = epochs(d)
    assert [e.epoch for e in joined] == [1, 2]
    assert [(e.cause.kind, e.cause.member_id) for e in joined if e.cause] == [
        (GroupCauseKind.MEMBER_JOINED, "a"), (GroupCauseKind.MEMBER_JOINED, "b")
    ]  # fmt: skip
    mark = len(d.log)
    b.ok(subscribed_topic_names=["t", "u"])
    [changed] = epochs(d, mark)
    assert changed.cause is not None
    assert changed.cause.kind == GroupCauseKind.SUBSCRIPTION_CHANGED
    mark = len(d.log)
    b.ok(member_epoch=-1)
    [left] = epochs(d, mark)
    assert left.cause is not None and (left.cause.kind, left.cause.member_id) == (
        GroupCauseKind.MEMBER_LEFT, "b")  # fmt: skip


def test_a_consumer_members_expired_session_and_a_topics_partition_count() -> None:
    d = driver_with(t=6)
    a, b = Consumer(d, G, "a"), Consumer(d, G, "b")
    a.ok()
    b.ok()
    mark = len(d.log)
    d.apply(d.shard.on_topics(topics_image(t=8), d.now))
    [grown] = epochs(d, mark)
    assert grown.cause == GroupCause(GroupCauseKind.SUBSCRIBED_TOPIC_CHANGED,
                                     detail="t 6 -> 8 partitions")  # fmt: skip
    mark = len(d.log)
    for _ in range(10):  # a keeps heartbeating; b goes silent past its 45 s session
        d.advance(SESSION // 2)
        a.ok()
    causes = [e.cause for e in epochs(d, mark)]
    assert [(c.kind, c.member_id) for c in causes if c] == [(GroupCauseKind.MEMBER_EXPIRED, "b")]
    assert set(consumer_group(d, G).members) == {"a"}


def test_an_upgrade_names_itself_then_the_member_that_joined() -> None:
    d = driver_with(t=6)
    d.form_group(G, 2)
    mark = len(d.log)
    Consumer(d, G, "k1").ok()
    upgraded, joined = epochs(d, mark)
    assert upgraded.epoch == 1 and upgraded.cause == GroupCause(
        GroupCauseKind.PROTOCOL_UPGRADED, detail="from classic generation 1"
    )
    assert joined.epoch == 2 and joined.cause is not None
    assert (joined.cause.kind, joined.cause.member_id) == (GroupCauseKind.MEMBER_JOINED, "k1")
