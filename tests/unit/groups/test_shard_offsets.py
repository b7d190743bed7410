"""GroupShard: OffsetCommit validation, OffsetFetch and OffsetDelete."""

from __future__ import annotations

from kafkacoord.codecs.models import (
    AdminOffset,
    GroupAdminAction,
    GroupAdminKey,
    GroupAdminValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record, Reply, Request, RequestRef

from .groupdriver import DELAY, Driver, commit_body, join_body, partition_errors

G = "g"


def fetch(
    d: Driver, group: str = G, topics: dict[str, list[int]] | None = None
) -> dict[tuple[str, int], api.FetchedPartition]:
    body = api.OffsetFetch(
        group_id=group,
        topics=None
        if topics is None
        else [api.FetchTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    reply = d.call(body)
    assert reply.error is ErrorCode.NONE
    assert isinstance(reply.body, api.OffsetFetchResponse)
    return {(t.name, p.partition): p for t in reply.body.topics for p in t.partitions}


def delete_offsets(d: Driver, topics: dict[str, list[int]], group: str = G) -> Reply:
    return d.call(
        api.OffsetDelete(
            group_id=group,
            topics=[api.FetchTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
    )


# --------------------------------------------------------------------------- commit


def test_standalone_commit_creates_simple_group() -> None:
    d = Driver()
    reply = d.call(commit_body(G, {("t", 0): 5, ("t", 1): 7, ("u", 0): 1}, metadata="m"))
    assert reply.error is ErrorCode.NONE
    assert set(partition_errors(reply).values()) == {ErrorCode.NONE}
    # A standalone consumer's progress, not a reset: no audit record.
    assert [r.key for r in d.log] == [
        OffsetCommitKey(G, "t", 0),
        OffsetCommitKey(G, "t", 1),
        OffsetCommitKey(G, "u", 0),
    ]
    value = d.log[0].value
    assert value == OffsetCommitValue(5, "m", d.now, -1, None)
    group = d.shard.group(G)
    assert group is not None and group.is_simple and group.state is GroupState.EMPTY
    got = fetch(d)
    assert {tp: p.offset for tp, p in got.items()} == {("t", 0): 5, ("t", 1): 7, ("u", 0): 1}
    assert got[("t", 0)].metadata == "m" and got[("t", 0)].commit_timestamp_ms == d.now


def test_a_reset_is_audited_then_tombstoned_in_its_batch() -> None:
    d = Driver()
    reply = d.call(commit_body(G, {("t", 0): 5, ("t", 1): 7, ("u", 0): 1}, reset=True))
    assert set(partition_errors(reply).values()) == {ErrorCode.NONE}
    audit_key = d.log[0].key
    assert isinstance(audit_key, GroupAdminKey) and d.log[1] == Record(audit_key, None)
    assert d.log[0].value == GroupAdminValue(
        GroupAdminAction.OFFSETS_RESET, d.now, "client", None,
        (AdminOffset("t", 0, None, 5), AdminOffset("t", 1, None, 7), AdminOffset("u", 0, None, 1)),
    )  # fmt: skip
    assert [r.key for r in d.log[2:]] == [
        OffsetCommitKey(G, "t", 0),
        OffsetCommitKey(G, "t", 1),
        OffsetCommitKey(G, "u", 0),
    ]
    # A member's commit marked reset is the member's own, not a reset.
    mark = len(d.log)
    d.call(commit_body(G, {("t", 0): 6}, member_id="m", generation=0, reset=True))
    assert not any(isinstance(r.key, GroupAdminKey) for r in d.log[mark:])


def test_commit_to_unknown_group_with_generation_is_illegal_generation() -> None:
    d = Driver()
    reply = d.call(commit_body(G, {("t", 0): 5}, member_id="m", generation=3))
    assert reply.error is ErrorCode.ILLEGAL_GENERATION
    assert partition_errors(reply) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert d.log == [] and d.shard.group(G) is None


def test_commit_empty_group_id_is_invalid() -> None:
    d = Driver()
    reply = d.call(commit_body("", {("t", 0): 1}))
    assert reply.error is ErrorCode.INVALID_GROUP_ID
    assert partition_errors(reply) == {("t", 0): ErrorCode.INVALID_GROUP_ID}


def test_member_commit_validation_in_stable_group() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    m = members[0]
    ok = d.call(commit_body(G, {("t", 0): 10}, member_id=m.member_id, generation=1))
    assert ok.error is ErrorCode.NONE
    assert d.shard.committed_offsets(G)[("t", 0)].offset == 10
    cases = [
        (commit_body(G, {("t", 0): 1}, member_id=m.member_id, generation=0),
         ErrorCode.ILLEGAL_GENERATION),
        (commit_body(G, {("t", 0): 1}, member_id="ghost", generation=1),
         ErrorCode.UNKNOWN_MEMBER_ID),
        # Standalone/admin commit while the group has members.
        (commit_body(G, {("t", 0): 1}), ErrorCode.UNKNOWN_MEMBER_ID),
        (commit_body(G, {("t", 0): 1}, member_id=m.member_id, generation=-1),
         ErrorCode.ILLEGAL_GENERATION),
    ]  # fmt: skip
    for body, code in cases:
        reply = d.call(body)
        assert reply.error is code, body
        assert set(partition_errors(reply).values()) == {code}
    assert d.shard.committed_offsets(G)[("t", 0)].offset == 10


def test_commit_during_rebalance() -> None:
    d = Driver()
    members = d.form_group(G, 2)
    leader = next(m for m in members if m.member_id == m.leader)
    other = next(m for m in members if m is not leader)
    lref = d.request(join_body(G, leader.member_id))
    # PreparingRebalance: members of the current generation may still commit.
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    ok = d.call(commit_body(G, {("t", 0): 3}, member_id=other.member_id, generation=1))
    assert ok.error is ErrorCode.NONE
    d.request(join_body(G, other.member_id))
    assert d.join_response(lref).generation_id == 2
    # CompletingRebalance: the generation is valid but the assignment is not yet known.
    reply = d.call(commit_body(G, {("t", 0): 4}, member_id=other.member_id, generation=2))
    assert reply.error is ErrorCode.REBALANCE_IN_PROGRESS


def test_reset_while_empty_and_member_id_with_negative_generation() -> None:
    d = Driver()
    (m,) = d.form_group(G, 1)
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=m.member_id)]))
    assert d.state(G) is GroupState.EMPTY
    # An admin reset (no member, generation -1) is allowed only now.
    assert d.call(commit_body(G, {("t", 0): 0})).error is ErrorCode.NONE
    # Kafka: any generation < 0 commit is accepted while Empty, member id or not.
    stale = commit_body(G, {("t", 1): 0}, member_id=m.member_id, generation=-1)
    assert d.call(stale).error is ErrorCode.NONE
    # A generation >= 0 still needs a member.
    late = commit_body(G, {("t", 1): 0}, member_id=m.member_id, generation=1)
    assert d.call(late).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_metadata_too_large_fails_only_that_partition() -> None:
    d = Driver(GroupConfig(offset_metadata_max_bytes=10))
    body = api.OffsetCommit(
        group_id=G,
        topics=[
            api.CommitTopic(
                name="t",
                partitions=[
                    api.CommitPartition(partition=0, offset=1, metadata="x" * 10),
                    api.CommitPartition(partition=1, offset=1, metadata="x" * 11),
                    api.CommitPartition(partition=2, offset=1, metadata=None),
                    # 5 characters outside the BMP are 10 UTF-16 units: at the limit.
                    api.CommitPartition(partition=3, offset=1, metadata="\U0001f600" * 5),
                    api.CommitPartition(partition=4, offset=1, metadata="\U0001f600" * 6),
                ],
            )
        ],
    )
    reply = d.call(body)
    assert reply.error is ErrorCode.NONE
    assert partition_errors(reply) == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ("t", 2): ErrorCode.NONE,
        ("t", 3): ErrorCode.NONE,
        ("t", 4): ErrorCode.OFFSET_METADATA_TOO_LARGE,
    }
    assert sorted(d.shard.committed_offsets(G)) == [("t", 0), ("t", 2), ("t", 3)]
    assert d.shard.committed_offsets(G)[("t", 2)].metadata == ""


def test_all_partitions_invalid_writes_nothing() -> None:
    d = Driver(GroupConfig(offset_metadata_max_bytes=1))
    reply = d.call(commit_body(G, {("t", 0): 1}, metadata="too long"))
    assert partition_errors(reply) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert d.log == [] and d.shard.group(G) is None


def test_retention_time_sets_explicit_expiry_and_leader_epoch_kept() -> None:
    d = Driver()
    body = api.OffsetCommit(
        group_id=G,
        retention_time_ms=60_000,
        topics=[
            api.CommitTopic(
                name="t", partitions=[api.CommitPartition(partition=0, offset=9, leader_epoch=4)]
            )
        ],
    )
    d.call(body)
    value = d.shard.committed_offsets(G)[("t", 0)]
    assert value.expire_timestamp_ms == d.now + 60_000 and value.leader_epoch == 4
    got = fetch(d)[("t", 0)]
    assert got.expire_timestamp_ms == d.now + 60_000 and got.leader_epoch == 4


# --------------------------------------------------------------------------- fetch


def test_fetch_listed_missing_and_unknown_group() -> None:
    d = Driver()
    d.call(commit_body(G, {("t", 0): 5}))
    got = fetch(d, topics={"t": [0, 1], "v": [2]})
    assert got[("t", 0)].offset == 5
    assert got[("t", 1)].offset == -1 and got[("t", 1)].metadata == ""
    assert got[("v", 2)].offset == -1 and got[("v", 2)].leader_epoch == -1
    assert fetch(d, "nobody") == {}
    assert fetch(d, "nobody", {"t": [0]})[("t", 0)].offset == -1
    assert d.call(api.OffsetFetch(group_id="")).error is ErrorCode.INVALID_GROUP_ID


def test_fetch_all_is_sorted_by_topic_then_partition() -> None:
    d = Driver()
    d.call(commit_body(G, {("b", 1): 1, ("a", 3): 1, ("b", 0): 1, ("a", 0): 1}))
    reply = d.call(api.OffsetFetch(group_id=G))
    assert isinstance(reply.body, api.OffsetFetchResponse)
    assert [(t.name, [p.partition for p in t.partitions]) for t in reply.body.topics] == [
        ("a", [0, 3]),
        ("b", [0, 1]),
    ]


# --------------------------------------------------------------------------- delete


def test_offset_delete_on_empty_group() -> None:
    d = Driver()
    d.call(commit_body(G, {("t", 0): 5, ("t", 1): 6}))
    reply = delete_offsets(d, {"t": [0, 7]})
    assert reply.error is ErrorCode.NONE
    assert partition_errors(reply) == {("t", 0): ErrorCode.NONE, ("t", 7): ErrorCode.NONE}
    assert d.log[-1].key == OffsetCommitKey(G, "t", 0) and d.log[-1].value is None
    # The commit's two offsets, then this delete's audit and its tombstone and one
    # offset tombstone: none for the partition without an offset.
    assert len(d.log) == 5
    audit = d.log[-3].value
    assert isinstance(audit, GroupAdminValue) and d.log[-2].value is None
    assert audit.action == GroupAdminAction.OFFSETS_DELETED
    assert audit.offsets == (AdminOffset("t", 0, 5, None),)
    assert sorted(d.shard.committed_offsets(G)) == [("t", 1)]


def test_offset_delete_refuses_subscribed_topics_of_a_consumer_group() -> None:
    d = Driver()
    members = d.form_group(G, 2, topics=("t",))
    d.call(commit_body(G, {("t", 0): 1}, member_id=members[0].member_id, generation=1))
    # An offset of a topic nobody subscribes to (e.g. committed before a subscription change).
    d.shard.replay(Record(OffsetCommitKey(G, "old", 0), OffsetCommitValue(1, "", d.now)))
    reply = delete_offsets(d, {"t": [0], "old": [0]})
    assert partition_errors(reply) == {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("old", 0): ErrorCode.NONE,
    }
    assert sorted(d.shard.committed_offsets(G)) == [("t", 0)]


def test_offset_delete_errors() -> None:
    d = Driver()
    assert delete_offsets(d, {"t": [0]}).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert delete_offsets(d, {"t": [0]}, group="").error is ErrorCode.INVALID_GROUP_ID
    # A non-consumer group with members: its subscriptions are opaque.
    ref = d.request(join_body(G, protocol_type="connect", client_id="w"))
    reply = d.reply(ref)
    assert reply is not None and reply.error is ErrorCode.MEMBER_ID_REQUIRED
    assert isinstance(reply.body, api.JoinGroupResponse)
    d.request(join_body(G, reply.body.member_id, protocol_type="connect"))
    d.advance(DELAY)
    assert d.state(G) is GroupState.COMPLETING_REBALANCE
    assert delete_offsets(d, {"t": [0]}).error is ErrorCode.NON_EMPTY_GROUP


def test_offset_delete_while_consumer_group_has_no_generation_yet() -> None:
    d = Driver()
    mid = d.new_member_id(G)
    d.request(join_body(G, mid))
    # PreparingRebalance of a brand-new group: topics unknown, so every topic counts as
    # subscribed (Kafka).
    reply = delete_offsets(d, {"x": [0]})
    assert partition_errors(reply) == {("x", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}


def test_an_admin_reset_names_the_callers_principal_and_each_offset_before() -> None:
    d = Driver()
    d.call(commit_body(G, {("t", 0): 120}))
    mark = len(d.log)
    ref = RequestRef("admin-cli", 41, None, principal="CN=alice,O=ops")
    body = commit_body(G, {("t", 0): 0}, reset=True)
    d.apply(d.shard.handle(Request(ref, "OffsetCommit", body), d.now))
    audit, tombstone, commit = d.log[mark:]
    assert audit.key == tombstone.key == GroupAdminKey(G, "admin-cli:41")
    reset = (AdminOffset("t", 0, 120, 0),)
    action = GroupAdminAction.OFFSETS_RESET
    assert audit.value == GroupAdminValue(action, d.now, "admin-cli", "CN=alice,O=ops", reset)
    assert tombstone.value is None and commit.key == OffsetCommitKey(G, "t", 0)
    # History only: a load rebuilds the same offsets with or without the audit records.
    without = [r for r in d.log if not isinstance(r.key, GroupAdminKey)]
    assert d.reload().committed_offsets(G) == d.reload(without).committed_offsets(G)
    assert not any(isinstance(r.key, GroupAdminKey) for r in d.folded())


def test_a_members_commit_is_not_audited() -> None:
    d = Driver()
    [m] = d.form_group(G, 1)
    mark = len(d.log)
    d.call(commit_body(G, {("t", 0): 5}, member_id=m.member_id, generation=m.generation))
    assert [type(r.key) for r in d.log[mark:]] == [OffsetCommitKey]


# ------------------------------------------------------------------ one batch at most


def test_a_commit_whose_records_cannot_fit_one_batch_is_refused_alone() -> None:
    """The broker refuses a batch over its max.message.bytes, and a refused append costs
    the shard its session: such a commit is refused before anything replays, with the
    error Kafka gives it, and the shard serves on."""
    d = Driver()
    assert d.call(commit_body(G, {("t", 0): 5})).error is ErrorCode.NONE
    logged = list(d.log)
    metadata = "m" * 4_000
    # 300 partitions of 4 kB metadata: 1.2 MB of records, more than one batch holds.
    too_large = commit_body("big", {("t", p): p for p in range(300)}, metadata=metadata)
    reply = d.call(too_large)
    assert reply.error is ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    assert not reply.error.retriable
    assert "send fewer partitions" in (reply.message or "")
    assert d.log == logged  # nothing written
    unknown = fetch(d, "big", {"t": [0, 299]})
    assert [p.offset for p in unknown.values()] == [-1, -1]  # nothing replayed
    # A reset of the same size, with its audit record, the same.
    reset = commit_body("big", {("t", p): p for p in range(300)}, metadata=metadata, reset=True)
    assert d.call(reset).error is ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    assert d.log == logged
    # Under the limit is taken: 200 such partitions, about 0.8 MB.
    fits = commit_body("big", {("t", p): p for p in range(200)}, metadata=metadata)
    assert set(partition_errors(d.call(fits)).values()) == {ErrorCode.NONE}
    assert len(d.log) == len(logged) + 200
    assert d.call(commit_body(G, {("t", 0): 6})).error is ErrorCode.NONE
    assert fetch(d)[("t", 0)].offset == 6


def test_deleting_a_group_whose_tombstones_cannot_fit_one_batch_is_refused() -> None:
    """12,000 offsets: their tombstones take more than one batch. Deleting a group is
    one change, so it is refused whole and the group keeps its offsets."""
    d = Driver()
    for chunk in range(6):
        partitions = range(chunk * 2_000, (chunk + 1) * 2_000)
        offsets = {("topic-with-a-name", p): 1 for p in partitions}
        assert d.call(commit_body("big", offsets)).error is ErrorCode.NONE
    logged = list(d.log)
    reply = d.call(api.DeleteGroups(groups=["big"]))
    assert reply.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert "more than one batch" in (reply.message or "")
    assert d.log == logged
    assert len(d.shard.committed_offsets("big")) == 12_000
