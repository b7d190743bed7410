"""CooperativeStickyAssignor, partitions_to_revoke, and the assignor registry."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors import (
    ASSIGNORS,
    COOPERATIVE_STICKY,
    RebalanceProtocol,
    cooperative_sticky_assign,
    get_assignor,
    partitions_to_revoke,
    range_assign,
    roundrobin_assign,
    sticky_assign,
    sticky_plan,
)

from .support import TP, Assign, all_partitions, tps
from .support import check_valid as shared_check_valid

c1, c2, c3, c4 = "consumer1", "consumer2", "consumer3", "consumer4"
GEN = 1


def check_valid(subs: Mapping[str, list[str]], ppt: Mapping[str, int], assignment: Assign) -> None:
    """No partition twice, only subscribed topics, every member present (may be incomplete)."""
    shared_check_valid(subs, ppt, assignment, complete=False)


# --------------------------------------------------------------------------- Kafka vectors


def test_max_quota_consumer_more_than_expected_withholds_moving_partition() -> None:
    both = ["topic1", "topic2"]
    subs = {c1: both, c2: both, c3: both}
    owned = {c1: tps("topic1-0", "topic2-0"), c2: tps("topic1-1", "topic2-1"), c3: []}
    got = cooperative_sticky_assign(
        subs, {"topic1": 2, "topic2": 2}, owned, dict.fromkeys(subs, GEN)
    )
    # topic2-0 moves from consumer1 to consumer3: revoked now, assigned next rebalance.
    assert got == {c1: tps("topic1-0"), c2: tps("topic1-1", "topic2-1"), c3: []}
    assert partitions_to_revoke(owned, got) == {c1: tps("topic2-0"), c2: [], c3: []}
    follow_up = cooperative_sticky_assign(
        subs, {"topic1": 2, "topic2": 2}, got, dict.fromkeys(subs, 2)
    )
    assert follow_up == {c1: tps("topic1-0"), c2: tps("topic1-1", "topic2-1"), c3: tps("topic2-0")}


def test_add_consumer_one_topic() -> None:
    ppt = {"topic": 3}
    first = cooperative_sticky_assign({c1: ["topic"]}, ppt, {})
    assert first == {c1: tps("topic-0", "topic-1", "topic-2")}
    subs = {c1: ["topic"], c2: ["topic"]}
    second = cooperative_sticky_assign(subs, ppt, {c1: first[c1], c2: []}, {c1: GEN, c2: GEN})
    assert second == {c1: tps("topic-0", "topic-1"), c2: []}
    third = cooperative_sticky_assign(subs, ppt, second, {c1: 2, c2: 2})
    assert third == {c1: tps("topic-0", "topic-1"), c2: tps("topic-2")}


def test_add_two_consumers_two_topics() -> None:
    both = ["topic1", "topic2"]
    ppt = {"topic1": 3, "topic2": 4}
    first = cooperative_sticky_assign({c1: both, c2: both}, ppt, None)
    subs = {c1: both, c2: both, c3: both, c4: both}
    owned = {c1: first[c1], c2: first[c2], c3: [], c4: []}
    second = cooperative_sticky_assign(subs, ppt, owned, dict.fromkeys(subs, GEN))
    assert second == {
        c1: tps("topic1-0", "topic2-1"),
        c2: tps("topic1-1", "topic2-0"),
        c3: [],
        c4: [],
    }
    third = cooperative_sticky_assign(subs, ppt, second, dict.fromkeys(subs, 2))
    assert third == sticky_assign(subs, ppt, owned, dict.fromkeys(subs, GEN))


def test_partition_claimed_by_two_members_in_same_generation_is_withheld() -> None:
    subs = {c1: ["topic"], c2: ["topic"], c3: ["topic"]}
    owned = {c1: tps("topic-0", "topic-1"), c2: tps("topic-0", "topic-2"), c3: []}
    got = cooperative_sticky_assign(subs, {"topic": 3}, owned, dict.fromkeys(subs, GEN))
    assert got == {c1: tps("topic-1"), c2: tps("topic-2"), c3: []}


def test_rack_aware_test_non_rack_cooperative_vectors() -> None:
    # testRackAwareAssignmentWithNonEqualSubscription, cooperative branch with matching racks
    # (i.e. the non-rack algorithm): owned -> intermediate -> final. General path.
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    subs = {
        "consumer0": ["t1", "t2", "t3"],
        "consumer1": ["t1", "t2", "t3"],
        "consumer2": ["t1", "t3"],
    }
    owned = {
        "consumer0": tps("t1-0", "t1-1", "t1-2", "t1-3", "t1-4"),
        "consumer1": tps("t1-5", "t2-0", "t2-1", "t2-2", "t2-3"),
        "consumer2": tps("t2-4", "t2-5", "t2-6", "t3-0", "t3-1"),
    }
    assert sticky_plan(subs, ppt, owned).transferring is None
    intermediate = cooperative_sticky_assign(subs, ppt, owned)
    assert intermediate == {
        "consumer0": tps("t1-2", "t1-3", "t1-4"),
        "consumer1": tps("t2-0", "t2-1", "t2-2", "t2-3"),
        "consumer2": tps("t3-0", "t3-1"),
    }
    final = cooperative_sticky_assign(subs, ppt, intermediate)
    assert final == {
        "consumer0": tps("t1-2", "t1-3", "t1-4", "t2-4", "t2-5"),
        "consumer1": tps("t2-0", "t2-1", "t2-2", "t2-3", "t2-6"),
        "consumer2": tps("t1-0", "t1-1", "t1-5", "t3-0", "t3-1"),
    }


def test_higher_generation_owner_keeps_partition_despite_stale_claim() -> None:
    both = ["topic", "topic2"]
    claim = tps("topic-0", "topic-2", "topic2-1")
    got = cooperative_sticky_assign(
        {c1: both, c2: both}, {"topic": 3, "topic2": 3}, {c1: claim, c2: claim}, {c1: 10, c2: 9}
    )
    assert got == {c1: claim, c2: tps("topic-1", "topic2-0", "topic2-2")}


def test_ownership_of_non_members_is_ignored() -> None:
    got = cooperative_sticky_assign({c1: ["t"]}, {"t": 2}, {c1: [], "gone": tps("t-0")})
    assert got == {c1: tps("t-0", "t-1")}


def test_partitions_to_revoke_lists_every_member() -> None:
    owned = {"a": tps("t-0", "t-1", "u-0"), "b": tps("t-2")}
    new = {"a": tps("t-1"), "b": tps("t-2", "t-0"), "c": tps("u-0")}
    assert partitions_to_revoke(owned, new) == {"a": tps("t-0", "u-0"), "b": [], "c": []}
    assert partitions_to_revoke({}, {}) == {}
    assert partitions_to_revoke({"a": tps("t-3")}, {}) == {"a": tps("t-3")}


# --------------------------------------------------------------------------- registry


def test_registry_names_and_protocols() -> None:
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    for name, assignor in ASSIGNORS.items():
        assert assignor.name == name
        assert get_assignor(name) is assignor
    assert ASSIGNORS["range"].supported_protocols == (RebalanceProtocol.EAGER,)
    assert ASSIGNORS["roundrobin"].supported_protocols == (RebalanceProtocol.EAGER,)
    assert ASSIGNORS["sticky"].supported_protocols == (RebalanceProtocol.EAGER,)
    assert ASSIGNORS["cooperative-sticky"].supported_protocols == (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )
    assert ASSIGNORS["cooperative-sticky"] is COOPERATIVE_STICKY
    assert int(RebalanceProtocol.EAGER) == 0
    assert int(RebalanceProtocol.COOPERATIVE) == 1


def test_registry_is_read_only_and_rejects_unknown_names() -> None:
    with pytest.raises(TypeError):
        ASSIGNORS["mine"] = ASSIGNORS["range"]  # type: ignore[index]
    with pytest.raises(KeyError, match="known: cooperative-sticky, range"):
        get_assignor("uniform")


def test_registry_uniform_calling_convention() -> None:
    subs = {"a": ["t", "u"], "b": ["t"]}
    ppt = {"t": 4, "u": 2}
    owned = {"a": tps("t-0", "t-1", "t-2"), "b": tps("t-3")}
    gens = {"a": 3, "b": 3}
    ids: dict[str, str | None] = {"b": "static-b"}

    def run(name: str) -> dict[str, list[TP]]:
        return ASSIGNORS[name].assign(
            subs, ppt, owned=owned, generations=gens, group_instance_ids=ids
        )

    assert run("range") == range_assign(subs, ppt, group_instance_ids=ids)
    assert run("roundrobin") == roundrobin_assign(subs, ppt, group_instance_ids=ids)
    assert run("sticky") == sticky_assign(subs, ppt, owned, gens)
    assert run("cooperative-sticky") == cooperative_sticky_assign(subs, ppt, owned, gens)


# --------------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]
MEMBERS = [f"c{i}" for i in range(8)]
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
members_st = st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=7, unique=True)
ppt_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 8), max_size=4)
topics_st = st.lists(st.sampled_from(TOPICS), unique=True, max_size=4)


@st.composite
def scenario(
    draw: st.DrawFn, equal: bool | None = None
) -> tuple[dict[str, list[str]], dict[str, int], dict[str, list[TP]]]:
    """Subscriptions and a *disjoint* current ownership (each partition has <= 1 owner)."""
    members = draw(members_st)
    ppt = draw(ppt_st)
    same = draw(st.booleans()) if equal is None else equal
    shared = draw(topics_st)
    subs = {m: shared if same else draw(topics_st) for m in members}
    owned: dict[str, list[TP]] = {m: [] for m in members}
    for t, n in ppt.items():
        for p in range(n):
            holder = draw(st.sampled_from([None, *members]))
            if holder is not None:
                owned[holder].append((t, p))
    return subs, ppt, owned


@PROPS
@given(scenario(), st.integers(-1, 5))
def test_never_assigns_a_partition_owned_by_another_member(
    case: tuple[dict[str, list[str]], dict[str, int], dict[str, list[TP]]], gen: int
) -> None:
    subs, ppt, owned = case
    gens = dict.fromkeys(subs, gen)
    got = cooperative_sticky_assign(subs, ppt, owned, gens)
    check_valid(subs, ppt, got)
    owner = {tp: m for m, tps_ in owned.items() for tp in tps_}
    for member, partitions in got.items():
        for tp in partitions:
            assert owner.get(tp, member) == member
    # It is the sticky assignment minus exactly the partitions changing hands.
    sticky = sticky_assign(subs, ppt, owned, gens)
    for member in subs:
        withheld = set(sticky[member]) - set(got[member])
        assert set(got[member]) <= set(sticky[member])
        assert withheld == {tp for tp in sticky[member] if owner.get(tp, member) != member}


@PROPS
@given(members_st, ppt_st, st.data())
def test_conflicting_claims_only_the_claimant_itself_may_receive(
    members: list[str], ppt: dict[str, int], data: st.DataObject
) -> None:
    subs = {m: data.draw(topics_st) for m in members}
    universe = [(t, p) for t, n in ppt.items() for p in range(n)]
    owned = {
        m: data.draw(st.lists(st.sampled_from(universe), max_size=5)) if universe else []
        for m in members
    }
    gens = {m: data.draw(st.integers(-1, 2)) for m in members}
    got = cooperative_sticky_assign(subs, ppt, owned, gens)
    check_valid(subs, ppt, got)
    claimed_by: dict[TP, set[str]] = {}
    for m, claims in owned.items():
        for tp in claims:
            claimed_by.setdefault(tp, set()).add(m)
    for member, partitions in got.items():
        for tp in partitions:
            assert member in claimed_by.get(tp, {member})


@PROPS
@given(scenario())
def test_follow_up_rebalances_converge_to_a_complete_balanced_assignment(
    case: tuple[dict[str, list[str]], dict[str, int], dict[str, list[TP]]],
) -> None:
    subs, ppt, owned = case
    current: dict[str, list[TP]] = owned
    for generation in range(1, 6):
        nxt = cooperative_sticky_assign(subs, ppt, current, dict.fromkeys(subs, generation))
        revoked = partitions_to_revoke(current, nxt)
        for m in subs:
            assert set(current[m]) - set(revoked[m]) <= set(nxt[m])
        if nxt == current:
            break
        current = nxt
    else:
        pytest.fail("cooperative rebalances did not converge in 5 rounds")
    assert {tp for v in current.values() for tp in v} == all_partitions(subs, ppt)
    sizes = {m: len(v) for m, v in current.items()}
    for a in subs:
        for b in subs:
            if sizes[a] > sizes[b] + 1:
                assert not any(t in subs[b] for t, _ in current[a])


@PROPS
@given(scenario(equal=True))
def test_equal_subscriptions_settle_fully_balanced_in_two_rounds(
    case: tuple[dict[str, list[str]], dict[str, int], dict[str, list[TP]]],
) -> None:
    subs, ppt, owned = case
    first = cooperative_sticky_assign(subs, ppt, owned, dict.fromkeys(subs, 1))
    second = cooperative_sticky_assign(subs, ppt, first, dict.fromkeys(subs, 2))
    assert {tp for v in second.values() for tp in v} == all_partitions(subs, ppt)
    sizes = [len(v) for v in second.values()]
    assert max(sizes) - min(sizes) <= 1
    assert cooperative_sticky_assign(subs, ppt, second, dict.fromkeys(subs, 3)) == second


@given(
    st.dictionaries(
        st.sampled_from(MEMBERS), st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5)))
    ),
    st.dictionaries(
        st.sampled_from(MEMBERS), st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5)))
    ),
)
def test_partitions_to_revoke_partitions_the_owned_set(
    owned: dict[str, list[TP]], new: dict[str, list[TP]]
) -> None:
    revoke = partitions_to_revoke(owned, new)
    assert set(revoke) == set(owned) | set(new)
    for m, partitions in revoke.items():
        assert partitions == sorted(set(partitions))
        kept = set(owned.get(m, ())) & set(new.get(m, ()))
        assert set(partitions) | kept == set(owned.get(m, ()))
        assert not set(partitions) & set(new.get(m, ()))
