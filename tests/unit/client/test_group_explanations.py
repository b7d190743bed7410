"""The words explain group prints: every cause kind, every admin action, records written
before causes, and a group's history read back from a real shard's records."""

from __future__ import annotations

import pytest

from kafkacoord.client.group_explanations import (
    NOT_RECORDED,
    admin_words,
    cause_words,
    explain_group,
)
from kafkacoord.codecs.models import (
    AdminOffset,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    GroupAdminAction,
    GroupAdminKey,
    GroupAdminValue,
    GroupCause,
    GroupCauseKind,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
)
from kafkacoord.codecs.records import decode_record, encode_record
from kafkacoord.coordinator.protocol import group_api as api
from tests.unit.groups.groupdriver import Driver, commit_body, join_body

T0 = 1_795_000_000_000  # 2026-11-18T11:06:40Z
K = GroupCauseKind
C2 = GroupCause(K.MEMBER_LEFT, member_id="c2-1", client_id="c2", client_host="/127.0.0.1")


@pytest.mark.parametrize(
    ("cause", "words"),
    [
        (GroupCause(K.MEMBER_JOINED, member_id="c1-1", client_id="c1", client_host="/10.0.0.1"),
         "member c1-1 (client c1, /10.0.0.1) joined"),
        (C2, "member c2-1 (client c2, /127.0.0.1) left"),
        (GroupCause(K.MEMBER_EXPIRED, member_id="m", detail="no heartbeat in its 10000 ms session"),
         "member m's session expired (no heartbeat in its 10000 ms session)"),
        (GroupCause(K.MEMBER_REJOINED, member_id="m"), "member m rejoined"),
        (GroupCause(K.SUBSCRIPTION_CHANGED, member_id="m", client_id="c"),
         "member m (client c)'s subscription changed"),
        (GroupCause(K.STATIC_MEMBER_REPLACED, member_id="i-9", group_instance_id="i",
                    detail="replaced i-1"),
         "static member i-9 (instance i) restarted (replaced i-1)"),
        (GroupCause(K.SYNC_EXPIRED, member_id="m", detail="2 member(s) sent no SyncGroup in time"),
         "member m did not sync in time (2 member(s) sent no SyncGroup in time)"),
        (GroupCause(K.MEMBER_REMOVED, member_id="m", detail="removed by client admin"),
         "member m was removed by an admin (removed by client admin)"),
        (GroupCause(K.SUBSCRIBED_TOPIC_CHANGED, detail="t 6 -> 8 partitions"),
         "subscribed topics changed (t 6 -> 8 partitions)"),
        (GroupCause(K.GROUP_MAX_SIZE_EXCEEDED, detail="3 members, limit 2"),
         "the group is over its maximum size (3 members, limit 2)"),
        (GroupCause(K.PROTOCOL_UPGRADED, detail="from classic generation 3"),
         "the classic group became a consumer group (from classic generation 3)"),
        (GroupCause("a_future_kind"), "a future kind"),
        (GroupCause("a_future_kind", member_id="m"), "a future kind: member m"),
        (None, NOT_RECORDED),
    ],
)  # fmt: skip
def test_cause_words(cause: GroupCause | None, words: str) -> None:
    assert cause_words(cause) == words


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (GroupAdminValue(GroupAdminAction.OFFSETS_RESET, T0, "adm", "User:alice",
                         (AdminOffset("orders", 0, 120, 0), AdminOffset("orders", 1, None, 5))),
         "offsets reset by User:alice (request adm:7): orders-0 120 → 0, orders-1 none → 5"),
        (GroupAdminValue(GroupAdminAction.OFFSETS_DELETED, T0, "adm", None,
                         (AdminOffset("orders", 0, 120, None),)),
         "offsets deleted by client adm (no principal: unauthenticated) (request adm:7): "
         "orders-0 120 → none"),
        (GroupAdminValue(GroupAdminAction.GROUP_DELETED, T0, "adm", "User:bob",
                         (AdminOffset("orders", 0, 3, None),)),
         "group deleted by User:bob (request adm:7) with 1 committed offset(s)"),
        (GroupAdminValue(GroupAdminAction.GROUP_DELETED, T0, "adm", "User:bob"),
         "group deleted by User:bob (request adm:7)"),
        (GroupAdminValue(GroupAdminAction.OFFSETS_RESET, T0, "adm", "U",
                         tuple(AdminOffset("t", p, None, 0) for p in range(7))),
         "offsets reset by U (request adm:7): t-0 none → 0, t-1 none → 0, t-2 none → 0, "
         "t-3 none → 0, t-4 none → 0, and 2 more"),
    ],
)  # fmt: skip
def test_admin_words(value: GroupAdminValue, words: str) -> None:
    assert admin_words(value, "adm:7") == words


def _classic(generation: int, *member_ids: str, cause: GroupCause | None) -> GroupMetadataValue:
    members = tuple(GroupMember(m, "c", "/h", 1, 1, b"", b"") for m in member_ids)
    return GroupMetadataValue("consumer", generation, T0, members, "range", cause=cause)


def test_classic_steps_with_and_without_causes_and_an_admin_action() -> None:
    admin = GroupAdminValue(GroupAdminAction.OFFSETS_RESET, T0 + 300_000, "adm", "User:alice",
                            (AdminOffset("orders", 0, 120, 0),))  # fmt: skip
    records = [
        (1, T0, GroupMetadataKey("g"), _classic(4, "c1-1", "c2-1", cause=None)),
        (2, T0 + 1, GroupMetadataKey("g"), _classic(4, "c1-1", "c2-1", cause=None)),  # again
        (5, T0 + 91_000, GroupMetadataKey("g"), _classic(5, "c1-1", cause=C2)),
        (8, T0 + 300_000, GroupAdminKey("g", "adm:7"), admin),
        (9, T0 + 300_000, GroupAdminKey("g", "adm:7"), None),
        (12, T0 + 400_000, GroupMetadataKey("g"), None),
    ]
    steps = explain_group(records)
    assert [s.text for s in steps] == [
        f"11:06:40 generation 4, 2 members: {NOT_RECORDED}",
        "11:08:11 generation 4 → 5, 2 → 1 member: member c2-1 (client c2, /127.0.0.1) left",
        "11:11:40 offsets reset by User:alice (request adm:7): orders-0 120 → 0",
        "11:13:20 the classic group's record was removed",
    ]
    assert [s.kind for s in steps] == ["rebalance", "rebalance", "admin", "deleted"]
    assert steps[1].generation == (4, 5) and steps[1].members == (2, 1) and steps[1].cause == C2
    assert steps[2].admin == admin and steps[2].request_id == "adm:7"


def test_consumer_steps_count_members_from_their_records() -> None:
    def member(m: str, value: ConsumerGroupMemberMetadataValue | None) -> tuple[object, ...]:
        return ConsumerGroupMemberMetadataKey("g", m), value

    joined = GroupCause(K.MEMBER_JOINED, member_id="b", client_id="b")
    meta = ConsumerGroupMemberMetadataValue("b", "/h", ("t",), 30_000)
    records = [
        (1, T0, *member("a", meta)),
        (2, T0, ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1, None)),
        (3, T0 + 1000, *member("b", meta)),
        (4, T0 + 1000, ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(2, joined)),
        (5, T0 + 2000, *member("b", None)),
        (6, T0 + 2000, ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(3, None)),
    ]
    steps = explain_group(records)  # type: ignore[arg-type]  # the tuples built above
    assert [s.text for s in steps] == [
        f"11:06:40 epoch 1, 1 member: {NOT_RECORDED}",
        "11:06:41 epoch 1 → 2, 1 → 2 members: member b (client b) joined",
        f"11:06:42 epoch 2 → 3, 2 → 1 member: {NOT_RECORDED}",
    ]
    assert all(s.protocol == "consumer" for s in steps)


def test_a_real_shards_records_explained() -> None:
    # The shard's own records, through the codec as a reader gets them.
    d = Driver()
    a, b = d.form_group("g", 2)
    d.call(api.LeaveGroup(group_id="g", members=[api.MemberIdentity(member_id=b.member_id)]))
    d.sync_all("g", [d.join_response(d.request(join_body("g", a.member_id)))], {"t": 3})
    d.call(api.LeaveGroup(group_id="g", members=[api.MemberIdentity(member_id=a.member_id)]))
    d.advance(10_000)
    d.call(commit_body("g", {("t", 0): 0}, reset=True), client_id="admin-cli")
    logged = [(i, d.now, *decode_record(*encode_record(r.key, r.value)))
              for i, r in enumerate(d.log)]  # fmt: skip
    texts = [s.text.split(" ", 1)[1] for s in explain_group(logged)]
    assert texts[0].startswith("generation 1, 2 members: member ")
    assert texts[1] == (f"generation 1 → 2, 2 → 1 member: member {b.member_id} "
                        "(client client, /127.0.0.1) left")  # fmt: skip
    assert texts[2].startswith(f"generation 2 → 3, 1 → 0 members: member {a.member_id} ")
    assert texts[3].startswith("offsets reset by client admin-cli (no principal: ")
    assert texts[3].endswith("t-0 none → 0")
    assert len(texts) == 4
