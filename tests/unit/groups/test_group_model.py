"""ClassicGroup and GroupConfig on their own: transitions, protocols, validation, records."""

from __future__ import annotations

import pytest

from kafkacoord.codecs.models import GroupMember, GroupMetadataValue
from kafkacoord.coordinator.groups.classic_group import ClassicGroup, GroupSnapshot
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.member import Member
from kafkacoord.coordinator.groups.state import GroupState, IllegalStateTransitionError
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.runtime.shard import RequestRef

from .groupdriver import sub

S = GroupState


def member(
    member_id: str,
    *names: str,
    instance: str | None = None,
    topics: tuple[str, ...] = ("t",),
    joined: bool = False,
) -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=1_000 * (len(member_id) + 1),
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=tuple((n, sub(*topics)) for n in (names or ("range",))),
        join_ref=RequestRef("c", 1) if joined else None,
    )


# --------------------------------------------------------------------------- config


def test_config_defaults_follow_design() -> None:
    c = GroupConfig()
    assert (c.min_session_timeout_ms, c.max_session_timeout_ms) == (6_000, 300_000)
    assert c.initial_rebalance_delay_ms == 3_000 and c.offset_metadata_max_bytes == 4_096
    assert c.offsets_retention_ms == 7 * 24 * 3_600_000
    assert c.offsets_retention_check_interval_ms == 600_000
    assert c.offsets_commit_timeout_ms == 5_000 and c.max_size is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_session_timeout_ms": 10, "max_session_timeout_ms": 5},
        {"max_size": 0},
        {"offsets_retention_ms": 0},
        {"initial_rebalance_delay_ms": -1},
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        GroupConfig(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- states


VALID = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.PREPARING_REBALANCE),
} | {(s, S.DEAD) for s in S}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions_are_kafkas(source: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", state=source)
    if (source, target) in VALID:
        group.transition(target, 42)
        assert group.state is target and group.previous_state is source
        assert group.state_timestamp_ms == 42
    else:
        with pytest.raises(IllegalStateTransitionError):
            group.transition(target, 42)
        assert group.state is source


def test_can_rebalance_states() -> None:
    for state in S:
        can = state in (S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE)
        assert ClassicGroup("g", state=state).can_rebalance() is can


# --------------------------------------------------------------------------- membership


def test_first_member_sets_protocol_type_and_leader_and_leader_passes_on() -> None:
    g = ClassicGroup("g")
    g.add(member("a"))
    g.add(member("b", instance="i"))
    assert g.protocol_type == "consumer" and g.leader == "a"
    assert g.static_members == {"i": "b"}
    g.remove("a")
    assert g.leader == "b"
    g.remove("b")
    assert g.leader is None and g.static_members == {}


def test_add_rejects_duplicate_instance_and_other_protocol_type() -> None:
    g = ClassicGroup("g")
    g.add(member("a", instance="i"))
    with pytest.raises(ValueError):
        g.add(member("b", instance="i"))
    other = member("c")
    other.protocol_type = "connect"
    with pytest.raises(ValueError):
        g.add(other)


def test_replace_static_member_keeps_position_assignment_and_leadership() -> None:
    g = ClassicGroup("g")
    g.add(member("a", instance="i"))
    g.add(member("b"))
    g.members["a"].assignment = b"A"
    g.pending_sync.add("a")
    new = g.replace_static_member("i", "a", "a2")
    assert list(g.members) == ["a2", "b"] and new.assignment == b"A"
    assert g.leader == "a2" and g.static_members == {"i": "a2"} and g.pending_sync == {"a2"}


def test_validate_member() -> None:
    g = ClassicGroup("g")
    g.add(member("a", instance="i"))
    g.add(member("b"))
    assert g.validate_member("b", None).member_id == "b"
    assert g.validate_member("a", "i").member_id == "a"
    for member_id, instance, code in [
        ("x", None, ErrorCode.UNKNOWN_MEMBER_ID),
        ("b", "i", ErrorCode.FENCED_INSTANCE_ID),
        ("a", "other", ErrorCode.UNKNOWN_MEMBER_ID),
    ]:
        with pytest.raises(ProtocolError) as err:
            g.validate_member(member_id, instance)
        assert err.value.code is code


# --------------------------------------------------------------------------- protocols


def test_supports_protocols() -> None:
    g = ClassicGroup("g")
    assert g.supports_protocols("consumer", ["x"])  # Empty accepts anything non-empty
    assert not g.supports_protocols("", ["x"]) and not g.supports_protocols("consumer", [])
    g.add(member("a", "range", "roundrobin"))
    g.transition(S.PREPARING_REBALANCE, 0)
    g.add(member("b", "roundrobin"))
    assert g.candidate_protocols() == {"roundrobin"}
    assert g.supports_protocols("consumer", ["roundrobin", "zzz"])
    assert not g.supports_protocols("consumer", ["range"])
    assert not g.supports_protocols("connect", ["roundrobin"])


def test_select_protocol_by_votes_and_java_hash_order_ties() -> None:
    g = ClassicGroup("g")
    g.add(member("a", "range", "roundrobin"))
    g.add(member("b", "roundrobin", "range"))
    g.add(member("c", "roundrobin", "range"))
    assert g.select_protocol() == "roundrobin"
    # 1:1 ties go to the first name in Java HashMap order, whatever the vote order.
    for first, second, winner in [
        ("roundrobin", "range", "range"),
        ("range", "roundrobin", "range"),
        ("range", "sticky", "sticky"),
        ("cooperative-sticky", "range", "range"),
    ]:
        tie = ClassicGroup("t")
        tie.add(member("a", first, second))
        tie.add(member("b", second, first))
        assert tie.select_protocol() == winner
    with pytest.raises(ValueError):
        ClassicGroup("e").select_protocol()


def test_member_vote_and_matches() -> None:
    m = member("a", "sticky", "range")
    assert m.vote({"range", "sticky"}) == "sticky"
    assert m.vote({"range"}) == "range"
    with pytest.raises(ValueError):
        m.vote({"x"})
    assert m.matches((("sticky", sub("t")), ("range", sub("t"))))
    assert not m.matches((("range", sub("t")), ("sticky", sub("t"))))


def test_heartbeat_satisfaction() -> None:
    m = member("a")
    assert not m.has_satisfied_heartbeat()
    m.join_ref = RequestRef("c", 1)
    assert m.has_satisfied_heartbeat()
    m.is_new = True
    assert not m.has_satisfied_heartbeat()


def test_maybe_elect_new_joined_leader() -> None:
    g = ClassicGroup("g")
    g.add(member("a"))
    g.add(member("b", joined=True))
    assert g.maybe_elect_new_joined_leader() and g.leader == "b"
    nobody = ClassicGroup("n")
    nobody.add(member("a"))
    assert not nobody.maybe_elect_new_joined_leader()
    assert not ClassicGroup("e").maybe_elect_new_joined_leader()


def test_rebalance_timeout_is_the_largest() -> None:
    g = ClassicGroup("g")
    assert g.rebalance_timeout_ms() == 0
    g.add(member("a"))
    g.add(member("bbb"))
    assert g.rebalance_timeout_ms() == 4_000


# --------------------------------------------------------------------------- offsets rules


def test_validate_offset_commit_matrix() -> None:
    empty = ClassicGroup("g", protocol_type="consumer")
    empty.validate_offset_commit("", None, -1)
    empty.validate_offset_commit("whoever", None, -1)
    with pytest.raises(ProtocolError) as err:
        empty.validate_offset_commit("", None, 0)
    assert err.value.code is ErrorCode.UNKNOWN_MEMBER_ID

    g = ClassicGroup("g", state=S.STABLE, generation=3)
    g.add(member("a"))
    g.validate_offset_commit("a", None, 3)
    for args, code in [
        (("a", None, 2), ErrorCode.ILLEGAL_GENERATION),
        (("", None, -1), ErrorCode.UNKNOWN_MEMBER_ID),
        (("x", None, 3), ErrorCode.UNKNOWN_MEMBER_ID),
    ]:
        with pytest.raises(ProtocolError) as err:
            g.validate_offset_commit(*args)
        assert err.value.code is code
    g.transition(S.PREPARING_REBALANCE, 0)
    g.validate_offset_commit("a", None, 3)
    g.transition(S.COMPLETING_REBALANCE, 0)
    with pytest.raises(ProtocolError) as err:
        g.validate_offset_commit("a", None, 3)
    assert err.value.code is ErrorCode.REBALANCE_IN_PROGRESS
    g.transition(S.DEAD, 0)
    with pytest.raises(ProtocolError) as err:
        g.validate_offset_commit("a", None, 3)
    assert err.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_subscribed_topics() -> None:
    g = ClassicGroup("g")
    assert g.compute_subscribed_topics() is None and not g.is_subscribed_to_topic("t")
    g.add(member("a", topics=("t", "u")))
    g.add(member("b", topics=("v",)))
    g.transition(S.PREPARING_REBALANCE, 0)
    assert g.compute_subscribed_topics() is None  # no protocol yet
    assert g.is_subscribed_to_topic("anything")  # unknown: a consumer group counts as subscribed
    g.init_next_generation(1)
    assert g.subscribed_topics == frozenset({"t", "u", "v"})
    assert not g.is_subscribed_to_topic("w")
    garbage = ClassicGroup("x", state=S.STABLE, protocol_type="consumer", protocol="range")
    bad = member("a")
    bad.protocols = (("range", b"\x00"),)
    garbage.add(bad)
    assert garbage.compute_subscribed_topics() is None


# --------------------------------------------------------------------------- records


def test_from_record_and_to_record_roundtrip() -> None:
    members = (
        GroupMember("a", "ca", "ha", 20_000, 10_000, sub("t"), b"A", "i-a"),
        GroupMember("b", "cb", "hb", -1, 7_000, sub("t"), b"B", None),
    )
    value = GroupMetadataValue("consumer", 5, 1_234, members, "range", "b")
    g = ClassicGroup.from_record("g", value)
    assert g.state is S.STABLE and g.generation == 5 and g.leader == "b"
    assert g.static_members == {"i-a": "a"} and g.persisted is value
    assert g.members["b"].rebalance_timeout_ms == 7_000  # -1: the session timeout
    assert g.subscribed_topics == frozenset({"t"})
    again = g.to_record(1_234)
    assert again.members[0] == members[0]
    assert again.members[1].rebalance_timeout_ms == 7_000
    empty = ClassicGroup.from_record("e", GroupMetadataValue("consumer", 2, 99, ()))
    assert empty.state is S.EMPTY and empty.state_timestamp_ms == 99
    assert GroupSnapshot.from_record("e", GroupMetadataValue("", 0, -1, ())).protocol_type == ""
