"""StickyAssignor (AbstractStickyAssignor): Kafka test vectors, Java-order helpers, properties."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors import (
    ASSIGNORS,
    RebalanceProtocol,
    sticky_assign,
    sticky_plan,
)
from kafkacoord.coordinator.groups.assignors.javacompat import (
    JavaHashSet,
    java_hashmap_order,
    java_string_key,
    topic_partition_hash,
)
from kafkacoord.coordinator.groups.partitioning import java_string_hash

from .support import TP, Assign, tps
from .support import check_valid as shared_check_valid

Subs = dict[str, list[str]]

c1, c2, c3, c4 = "consumer1", "consumer2", "consumer3", "consumer4"
topic, topic1, topic2, topic3 = "topic", "topic1", "topic2", "topic3"
GEN = 1  # Kafka's AbstractStickyAssignorTest.generationId


def check_valid(subs: Mapping[str, list[str]], ppt: Mapping[str, int], assignment: Assign) -> None:
    """The shared check, with lists in Java's topic order."""
    shared_check_valid(subs, ppt, assignment, sort_key=lambda tp: (java_string_key(tp[0]), tp[1]))


def kafka_balanced(assignment: Assign) -> bool:
    """AbstractStickyAssignorTest.verifyValidityAndBalance's balance rule: two members whose
    sizes differ by 2+ hold no partitions of a common topic."""
    members = list(assignment)
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            x, y = assignment[a], assignment[b]
            if abs(len(x) - len(y)) > 1 and {t for t, _ in x} & {t for t, _ in y}:
                return False
    return True


def fully_balanced(assignment: Assign) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def same_sets(assignment: Assign, expected: Mapping[str, list[TP]]) -> bool:
    return {m: set(v) for m, v in assignment.items()} == {m: set(v) for m, v in expected.items()}


# --------------------------------------------------------------------------- Java helpers


def test_java_hashmap_order_of_kafka_test_consumers() -> None:
    # "consumerN".hashCode() differ by one: buckets 13, 12, 11, 10, 9 for N = 0..4.
    assert java_hashmap_order([c1, c2, c3], java_string_hash) == [c3, c2, c1]
    names = ["consumer0", c1, c2, c3, c4]
    assert java_hashmap_order(names, java_string_hash) == [c4, c3, c2, c1, "consumer0"]


def test_java_hashmap_order_small_strings_and_collisions() -> None:
    assert java_hashmap_order(["c", "a", "b"], java_string_hash) == ["a", "b", "c"]
    # "Aa" and "BB" share hashCode 2112: same bucket, insertion order.
    assert java_hashmap_order(["BB", "Aa"], java_string_hash) == ["BB", "Aa"]
    assert java_hashmap_order(["Aa", "BB", "Aa"], java_string_hash) == ["Aa", "BB"]


def test_java_hashmap_order_grows_like_java() -> None:
    identity = int
    # 12 keys fit 16 buckets; the 13th grows the table to 32 and 16 no longer wraps to 0.
    assert java_hashmap_order([16, 0, *range(1, 11)], identity)[:2] == [16, 0]
    assert java_hashmap_order([16, 0, *range(1, 12)], identity)[:2] == [0, 1]
    # 9 keys in one bucket of a table under 64: treeifyBin resizes instead (to 32).
    same_bucket = [i * 16 for i in range(9)]
    assert java_hashmap_order(same_bucket[:8], identity) == same_bucket[:8]
    assert java_hashmap_order(same_bucket, identity) == [0, 32, 64, 96, 128, 16, 48, 80, 112]


def test_java_hashmap_order_matches_jvm() -> None:
    # Iteration order printed by OpenJDK 17 for a HashMap<String, _> filled in this order.
    keys = [
        "consumer-app-1-3f2a", "consumer-app-2-9bc1", "consumer-app-3-0d44", "rebalance",
        "\u4e2d", "Aa", "BB", "zz", "m-\U0001f600",
        "member-10", "member-11", "member-12", "member-13", "member-14",
    ]  # fmt: skip
    assert java_hashmap_order(keys, java_string_hash) == [
        "Aa", "BB", "zz", "consumer-app-3-0d44", "member-14", "member-13", "member-12",
        "member-11", "\u4e2d", "member-10", "m-\U0001f600", "consumer-app-1-3f2a", "rebalance",
        "consumer-app-2-9bc1",
    ]  # fmt: skip


def test_java_hash_set_matches_jvm() -> None:
    # Iteration orders printed by OpenJDK 17 for HashSet<TopicPartition> after these updates.
    s: JavaHashSet[TP] = JavaHashSet(topic_partition_hash)
    for tp in [("t1", 5), ("t1", 1), ("t1", 3), ("topic", 0), ("topic", 17)]:
        s.add(tp)
    s.discard(("t1", 1))
    s.add(("t1", 1))  # re-added: goes to the end of its bucket
    s.add(("t1", 40))
    assert list(s) == [("topic", 0), ("t1", 40), ("t1", 5), ("topic", 17), ("t1", 3), ("t1", 1)]
    assert s.first() == ("topic", 0)

    grown: JavaHashSet[TP] = JavaHashSet(topic_partition_hash)
    for p in range(26):  # grows the table from 16 to 64 buckets
        grown.add(("topic", p))
    grown.discard(("topic", 3))
    grown.discard(("topic", 19))
    grown.discard(("topic", 99))  # absent: no-op
    assert len(grown) == 24
    assert ("topic", 3) not in grown
    assert [p for _, p in grown] == [
        18, 20, 22, 24, 9, 11, 13, 15, 1, 5, 7, 25, 0, 17, 21, 23, 10, 12, 14, 16, 2, 4, 6, 8
    ]  # fmt: skip
    assert grown.first() == ("topic", 18)
    with pytest.raises(KeyError):
        JavaHashSet(topic_partition_hash).first()


def test_java_string_key_orders_by_utf16_units() -> None:
    # U+FF61 sorts after U+1F600 in Java (0xFF61 > 0xD83D) but before it in Python.
    halfwidth, emoji = "\uff61", "\U0001f600"
    assert halfwidth < emoji
    assert java_string_key(halfwidth) > java_string_key(emoji)


# --------------------------------------------------------------------------- Kafka vectors


def test_one_consumer_no_topic() -> None:
    plan = sticky_plan({"consumer": []}, {})
    assert plan.assignment == {"consumer": []}
    assert plan.transferring == {}


def test_one_consumer_nonexistent_topic() -> None:
    assert sticky_assign({"consumer": [topic]}, {topic: 0}) == {"consumer": []}


def test_one_consumer_one_topic() -> None:
    assert sticky_assign({"consumer": [topic]}, {topic: 3}) == {
        "consumer": tps("topic-0", "topic-1", "topic-2")
    }


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    owned = {"consumer": tps("topic-0", "topic-1", "other-0", "other-1")}
    plan = sticky_plan({"consumer": [topic]}, {topic: 2}, owned, {"consumer": GEN})
    assert plan.assignment == {"consumer": tps("topic-0", "topic-1")}
    assert plan.transferring == {}


def test_one_consumer_multiple_topics() -> None:
    got = sticky_assign({"consumer": [topic1, topic2]}, {topic1: 1, topic2: 2})
    assert got == {"consumer": tps("topic1-0", "topic2-0", "topic2-1")}


def test_two_consumers_one_topic_one_partition() -> None:
    subs = {c1: [topic], c2: [topic]}
    got = sticky_assign(subs, {topic: 1})
    check_valid(subs, {topic: 1}, got)
    assert sorted(len(v) for v in got.values()) == [0, 1]


def test_two_consumers_one_topic_two_partitions() -> None:
    got = sticky_assign({c1: [topic], c2: [topic]}, {topic: 2})
    assert got == {c1: tps("topic-0"), c2: tps("topic-1")}


def test_multiple_consumers_mixed_topic_subscriptions() -> None:
    subs = {c1: [topic1], c2: [topic1, topic2], c3: [topic1]}
    plan = sticky_plan(subs, {topic1: 3, topic2: 2})
    assert plan.assignment == {
        c1: tps("topic1-0", "topic1-2"),
        c2: tps("topic2-0", "topic2-1"),
        c3: tps("topic1-1"),
    }
    assert plan.transferring is None
    assert not plan.constrained


def test_two_consumers_two_topics_six_partitions() -> None:
    subs = {c1: [topic1, topic2], c2: [topic1, topic2]}
    assert sticky_assign(subs, {topic1: 3, topic2: 3}) == {
        c1: tps("topic1-0", "topic1-2", "topic2-1"),
        c2: tps("topic1-1", "topic2-0", "topic2-2"),
    }


def test_consumer_owning_min_quota_expected_max_quota() -> None:
    subs = {c1: [topic1, topic2], c2: [topic1, topic2]}
    owned = {c1: tps("topic1-0", "topic2-1"), c2: tps("topic1-1", "topic2-2")}
    plan = sticky_plan(subs, {topic1: 2, topic2: 3}, owned, {c1: GEN, c2: GEN})
    assert plan.assignment == {
        c1: tps("topic1-0", "topic2-0", "topic2-1"),
        c2: tps("topic1-1", "topic2-2"),
    }
    assert plan.transferring == {}


def test_max_quota_consumer_more_than_num_expected_max_capacity_members() -> None:
    # Needs Java HashMap order: consumer2 is visited before consumer1 and keeps maxQuota.
    both = [topic1, topic2]
    subs = {c1: both, c2: both, c3: both}
    owned = {c1: tps("topic1-0", "topic2-0"), c2: tps("topic1-1", "topic2-1"), c3: []}
    plan = sticky_plan(subs, {topic1: 2, topic2: 2}, owned, dict.fromkeys(subs, GEN))
    assert plan.transferring == {("topic2", 0): c3}
    assert plan.assignment == {
        c1: tps("topic1-0"),
        c2: tps("topic1-1", "topic2-1"),
        c3: tps("topic2-0"),
    }


def test_all_consumers_are_under_min_quota() -> None:
    both = [topic1, topic2]
    subs = {c1: both, c2: both, c3: both}
    owned = {c1: tps("topic1-0"), c2: tps("topic1-1"), c3: []}
    plan = sticky_plan(subs, {topic1: 2, topic2: 3}, owned, dict.fromkeys(subs, GEN))
    assert plan.transferring == {}
    assert plan.assignment == {
        c1: tps("topic1-0", "topic2-1"),
        c2: tps("topic1-1", "topic2-2"),
        c3: tps("topic2-0"),
    }


def test_add_remove_consumer_one_topic() -> None:
    ppt = {topic: 3}
    first = sticky_assign({c1: [topic]}, ppt)
    assert first == {c1: tps("topic-0", "topic-1", "topic-2")}

    plan = sticky_plan({c1: [topic], c2: [topic]}, ppt, {c1: first[c1], c2: []}, {c1: GEN, c2: GEN})
    assert plan.transferring == {("topic", 2): c2}
    assert plan.assignment == {c1: tps("topic-0", "topic-1"), c2: tps("topic-2")}

    third = sticky_plan({c2: [topic]}, ppt, {c2: plan.assignment[c2]}, {c2: GEN})
    assert third.assignment == {c2: tps("topic-0", "topic-1", "topic-2")}
    assert third.transferring == {}


def test_add_remove_two_consumers_two_topics() -> None:
    both = [topic1, topic2]
    ppt = {topic1: 3, topic2: 4}
    first = sticky_assign({c1: both, c2: both}, ppt)
    assert first == {
        c1: tps("topic1-0", "topic1-2", "topic2-1", "topic2-3"),
        c2: tps("topic1-1", "topic2-0", "topic2-2"),
    }

    subs = {c1: both, c2: both, c3: both, c4: both}
    owned = {c1: first[c1], c2: first[c2], c3: [], c4: []}
    second = sticky_plan(subs, ppt, owned, dict.fromkeys(subs, GEN))
    assert second.transferring == {
        ("topic1", 2): c3,
        ("topic2", 3): c3,
        ("topic2", 2): c4,
    }
    assert second.assignment == {
        c1: tps("topic1-0", "topic2-1"),
        c2: tps("topic1-1", "topic2-0"),
        c3: tps("topic1-2", "topic2-3"),
        c4: tps("topic2-2"),
    }

    owned3 = {c3: second.assignment[c3], c4: second.assignment[c4]}
    third = sticky_plan({c3: both, c4: both}, ppt, owned3, {c3: GEN, c4: GEN})
    assert third.assignment == {
        c3: tps("topic1-0", "topic1-2", "topic2-1", "topic2-3"),
        c4: tps("topic1-1", "topic2-0", "topic2-2"),
    }
    assert third.transferring == {}


def test_all_consumers_reach_expected_quota_and_are_considered_filled() -> None:
    subs = {c1: [topic], c2: [topic], c3: [topic]}
    owned = {c1: tps("topic-0", "topic-1"), c2: tps("topic-2"), c3: []}
    plan = sticky_plan(subs, {topic: 4}, owned, dict.fromkeys(subs, GEN))
    assert plan.assignment == {
        c1: tps("topic-0", "topic-1"),
        c2: tps("topic-2"),
        c3: tps("topic-3"),
    }
    assert plan.transferring == {}


def test_owned_partitions_invalidated_for_consumer_with_stale_generation() -> None:
    both = [topic, topic2]
    claim = tps("topic-0", "topic-2", "topic2-1")
    for stale in (9, -1):  # older generation, or no generation at all
        plan = sticky_plan(
            {c1: both, c2: both}, {topic: 3, topic2: 3}, {c1: claim, c2: claim}, {c1: 10, c2: stale}
        )
        assert same_sets(plan.assignment, {c1: claim, c2: tps("topic-1", "topic2-0", "topic2-2")})
        assert plan.transferring == {}


def test_owned_partitions_invalidated_for_consumer_with_multiple_generation() -> None:
    both = [topic, topic2]
    owned = {c1: tps("topic-0", "topic2-1", "topic-1"), c2: tps("topic-0", "topic2-1", "topic2-2")}
    plan = sticky_plan({c1: both, c2: both}, {topic: 3, topic2: 3}, owned, {c1: 10, c2: 8})
    assert same_sets(
        plan.assignment,
        {c1: tps("topic-0", "topic2-1", "topic-1"), c2: tps("topic-2", "topic2-2", "topic2-0")},
    )
    assert plan.transferring == {}


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [
        (3, {c1: tps("topic-1"), c2: tps("topic-2"), c3: tps("topic-0")}),
        (4, {c1: tps("topic-1", "topic-3"), c2: tps("topic-2"), c3: tps("topic-0")}),
    ],
)
def test_partition_claimed_by_multiple_consumers_in_same_generation(
    partitions: int, expected: dict[str, list[TP]]
) -> None:
    subs = {c1: [topic], c2: [topic], c3: [topic]}
    owned = {c1: tps("topic-0", "topic-1"), c2: tps("topic-0", "topic-2"), c3: []}
    plan = sticky_plan(subs, {topic: partitions}, owned, dict.fromkeys(subs, GEN))
    assert plan.assignment == expected
    assert plan.transferring == {("topic", 0): c3}


def test_ensure_partitions_assigned_to_highest_generation() -> None:
    every = [topic, topic2, topic3]
    subs = {c1: every, c2: every, c3: every}
    owned = {
        c1: tps("topic-0", "topic2-0", "topic3-0"),
        c2: tps("topic-1", "topic2-1", "topic3-1"),
        c3: tps("topic2-1", "topic3-0", "topic3-2"),
    }
    plan = sticky_plan(subs, {topic: 3, topic2: 3, topic3: 3}, owned, {c1: 10, c2: 9, c3: 8})
    assert plan.assignment == {
        c1: tps("topic-0", "topic2-0", "topic3-0"),
        c2: tps("topic-1", "topic2-1", "topic3-1"),
        c3: tps("topic-2", "topic2-2", "topic3-2"),
    }
    assert plan.transferring == {}


def test_no_reassignment_on_current_members() -> None:
    every = [topic, topic2, topic3, topic1]
    subs = {c1: every, c2: every, c3: every, c4: every}
    owned = {
        c1: [],
        c2: tps("topic-0", "topic2-0", "topic1-0"),
        c3: tps("topic3-2", "topic2-2", "topic1-1"),
        c4: tps("topic3-1", "topic-1", "topic-2"),
    }
    plan = sticky_plan(
        subs, {topic: 3, topic1: 3, topic2: 3, topic3: 3}, owned, {c1: -1, c2: 9, c3: 8, c4: 7}
    )
    assert plan.assignment[c1] == tps("topic1-2", "topic2-1", "topic3-0")
    assert plan.transferring == {}
    assert fully_balanced(plan.assignment)


def test_rack_aware_test_non_rack_vectors_uniform_subscription() -> None:
    # testRackAwareAssignmentWithUniformSubscription's non-rack-aware assignment.
    consumers = ["consumer0", "consumer1", "consumer2"]
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    subs = {c: ["t1", "t2", "t3"] for c in consumers}
    expected = {
        "consumer0": tps("t1-0", "t1-3", "t2-0", "t2-3", "t2-6"),
        "consumer1": tps("t1-1", "t1-4", "t2-1", "t2-4", "t3-0"),
        "consumer2": tps("t1-2", "t1-5", "t2-2", "t2-5", "t3-1"),
    }
    assert sticky_assign(subs, ppt) == expected
    assert sticky_assign(subs, ppt, expected) == expected


def test_rack_aware_test_non_rack_vectors_non_equal_subscription() -> None:
    # testRackAwareAssignmentWithNonEqualSubscription's non-rack-aware assignment (general path).
    consumers = ["consumer0", "consumer1", "consumer2"]
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    subs = {consumers[0]: ["t1", "t2", "t3"], consumers[1]: ["t1", "t2", "t3"]}
    subs[consumers[2]] = ["t1", "t3"]
    expected = {
        "consumer0": tps("t1-5", "t2-0", "t2-2", "t2-4", "t2-6"),
        "consumer1": tps("t1-3", "t2-1", "t2-3", "t2-5", "t3-0"),
        "consumer2": tps("t1-0", "t1-1", "t1-2", "t1-4", "t3-1"),
    }
    assert sticky_assign(subs, ppt) == expected
    assert sticky_assign(subs, ppt, expected) == expected


def test_javadoc_example_one() -> None:
    subs = {c: ["t0", "t1", "t2", "t3"] for c in ("C0", "C1", "C2")}
    assert sticky_assign(subs, dict.fromkeys(["t0", "t1", "t2", "t3"], 2)) == {
        "C0": tps("t0-0", "t1-1", "t3-0"),
        "C1": tps("t0-1", "t2-0", "t3-1"),
        "C2": tps("t1-0", "t2-1"),
    }


def test_javadoc_example_two() -> None:
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = sticky_assign(subs, ppt)
    assert first == {
        "C0": tps("t0-0"),
        "C1": tps("t1-0", "t1-1"),
        "C2": tps("t2-0", "t2-1", "t2-2"),
    }
    # C0 leaves: sticky keeps all five of the others' partitions.
    rest = {"C1": subs["C1"], "C2": subs["C2"]}
    second = sticky_assign(rest, ppt, {"C1": first["C1"], "C2": first["C2"]}, {"C1": 1, "C2": 1})
    assert second == {"C1": tps("t0-0", "t1-0", "t1-1"), "C2": tps("t2-0", "t2-1", "t2-2")}


def test_stickiness_when_potential_leader_leaves() -> None:
    subs = {c: [topic1] for c in (c1, c2, c3, c4)}
    first = sticky_assign(subs, {topic1: 3})
    assert all(len(v) <= 1 for v in first.values())
    rest = {c: [topic1] for c in (c2, c3, c4)}
    second = sticky_assign(rest, {topic1: 3}, {c: first[c] for c in rest}, dict.fromkeys(rest, GEN))
    for member, partitions in second.items():
        assert len(partitions) == 1
        assert not first[member] or first[member] == partitions


def _name(prefix: str, i: int, max_num: int) -> str:
    return prefix + str(i).zfill(len(str(max_num)))


def test_reassignment_after_one_consumer_leaves() -> None:
    ppt = {_name("t", i, 20): i for i in range(1, 20)}
    subs = {_name("c", i, 20): [_name("t", j, 20) for j in range(1, i + 1)] for i in range(1, 20)}
    first = sticky_assign(subs, ppt)
    check_valid(subs, ppt, first)
    assert kafka_balanced(first)
    gens = {m: i for i, m in enumerate(subs, start=1)}
    del subs["c10"]
    second = sticky_assign(subs, ppt, first, gens)
    check_valid(subs, ppt, second)
    assert kafka_balanced(second)


def test_same_subscriptions_after_one_consumer_leaves() -> None:
    ppt = {_name("t", i, 15): i for i in range(1, 15)}
    subs = {_name("c", i, 9): list(ppt) for i in range(1, 9)}
    first = sticky_plan(subs, ppt)
    assert first.transferring == {}
    del subs[_name("c", 5, 9)]
    second = sticky_plan(subs, ppt, first.assignment, dict.fromkeys(subs, GEN))
    assert second.transferring == {}
    check_valid(subs, ppt, second.assignment)
    assert fully_balanced(second.assignment)
    for member, partitions in second.assignment.items():
        assert set(first.assignment[member]) <= set(partitions)


def test_reassignment_after_one_consumer_added() -> None:
    ppt = {"topic": 20}
    subs = {_name("c", i, 10): ["topic"] for i in range(1, 10)}
    check_valid(subs, ppt, sticky_assign(subs, ppt))
    subs[_name("c", 10, 10)] = ["topic"]
    plan = sticky_plan(subs, ppt)
    assert plan.transferring == {}
    check_valid(subs, ppt, plan.assignment)
    assert fully_balanced(plan.assignment)


def test_assignment_updated_for_deleted_topic() -> None:
    got = sticky_assign({"consumer": [topic1, topic2, topic3]}, {topic1: 1, topic3: 100})
    assert len(got["consumer"]) == 101


def test_no_exception_when_only_subscribed_topic_deleted() -> None:
    first = sticky_assign({"consumer": [topic]}, {topic: 3})
    plan = sticky_plan({"consumer": [topic]}, {}, first, {"consumer": GEN})
    assert plan.assignment == {"consumer": []}
    assert plan.transferring == {}


def test_move_existing_assignments() -> None:
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {
        c1: ["topic1", "topic2"],
        c2: ["topic1", "topic2", "topic3", "topic4"],
        c3: ["topic2", "topic3", "topic4", "topic5", "topic6"],
    }
    owned = {
        c1: tps("topic1-0"),
        c2: tps("topic2-0", "topic3-0"),
        c3: tps("topic4-0", "topic5-0", "topic6-0"),
    }
    plan = sticky_plan(subs, ppt, owned, dict.fromkeys(subs, GEN))
    assert plan.transferring is None
    check_valid(subs, ppt, plan.assignment)
    assert kafka_balanced(plan.assignment)


def test_owned_partition_numbers_out_of_range_are_ignored() -> None:
    # The topic shrank (deleted and recreated): partition 5 no longer exists.
    owned = {c1: tps("t-0", "t-5"), c2: tps("t-1")}
    got = sticky_assign({c1: ["t"], c2: ["t"]}, {"t": 3}, owned)
    check_valid({c1: ["t"], c2: ["t"]}, {"t": 3}, got)


def test_zero_members() -> None:
    assert sticky_assign({}, {"t": 3}) == {}


def test_registry_entry() -> None:
    assignor = ASSIGNORS["sticky"]
    assert assignor.name == "sticky"
    assert assignor.supported_protocols == (RebalanceProtocol.EAGER,)
    subs = {c1: [topic], c2: [topic]}
    owned = {c1: tps("topic-0", "topic-1", "topic-2")}
    assert assignor.assign(subs, {topic: 3}, owned=owned) == sticky_assign(subs, {topic: 3}, owned)


def test_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="generation"):
        sticky_assign({c1: [topic]}, {topic: 1}, {}, {c1: "1"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        sticky_assign({c1: [topic]}, {topic: 1}, {c1: "topic-0"})  # type: ignore[dict-item]


# --------------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]
MEMBERS = [f"c{i}" for i in range(8)] + ["\U0001f600", "\uff61", "b"]
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

members_st = st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=7, unique=True)
ppt_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 8), max_size=4)
topics_st = st.lists(st.sampled_from(TOPICS), unique=True, max_size=4)


@st.composite
def claims(draw: st.DrawFn, members: list[str], ppt: Mapping[str, int]) -> dict[str, list[TP]]:
    """Arbitrary, possibly overlapping, possibly stale ownership claims."""
    universe = [(t, p) for t, n in ppt.items() for p in range(n)] + [("gone", 0), ("t0", 99)]
    return {m: draw(st.lists(st.sampled_from(universe), max_size=6)) for m in members}


@PROPS
@given(members_st, ppt_st, st.data())
def test_valid_for_arbitrary_inputs(
    members: list[str], ppt: dict[str, int], data: st.DataObject
) -> None:
    subs = {m: data.draw(topics_st) for m in members}
    owned = data.draw(claims(members, ppt))
    gens = {m: data.draw(st.integers(-1, 3)) for m in members if data.draw(st.booleans())}
    plan = sticky_plan(subs, ppt, owned, gens)
    check_valid(subs, ppt, plan.assignment)
    assert kafka_balanced(plan.assignment)
    first = frozenset(subs[members[0]])
    assert plan.constrained == all(frozenset(s) == first for s in subs.values())
    assert (plan.transferring is None) == (not plan.constrained)


@PROPS
@given(members_st, ppt_st, topics_st, st.data())
def test_equal_subscriptions_are_fully_balanced(
    members: list[str], ppt: dict[str, int], topics: list[str], data: st.DataObject
) -> None:
    subs = dict.fromkeys(members, topics)
    owned = data.draw(claims(members, ppt))
    gens = {m: data.draw(st.integers(-1, 3)) for m in members}
    plan = sticky_plan(subs, ppt, owned, gens)
    assert plan.constrained
    check_valid(subs, ppt, plan.assignment)
    assert fully_balanced(plan.assignment)


@PROPS
@given(members_st, ppt_st, st.data())
def test_fresh_general_assignment_is_balanced(
    members: list[str], ppt: dict[str, int], data: st.DataObject
) -> None:
    subs = {m: data.draw(topics_st) for m in members}
    got = sticky_assign(subs, ppt)
    check_valid(subs, ppt, got)
    # No member has 2+ more partitions than another member subscribed to one of its topics.
    for a in got:
        for b in got:
            if len(got[a]) > len(got[b]) + 1:
                assert not any(t in subs[b] for t, _ in got[a])


@PROPS
@given(members_st, ppt_st, st.data())
def test_previous_assignment_is_kept_when_nothing_changes(
    members: list[str], ppt: dict[str, int], data: st.DataObject
) -> None:
    subs = {m: data.draw(topics_st) for m in members}
    first = sticky_assign(subs, ppt)
    again = sticky_plan(subs, ppt, first, dict.fromkeys(members, 5))
    assert again.assignment == first
    assert not again.transferring


@PROPS
@given(members_st, ppt_st, topics_st, st.sampled_from(MEMBERS))
def test_member_added_moves_only_the_minimum(
    members: list[str], ppt: dict[str, int], topics: list[str], newcomer: str
) -> None:
    if newcomer in members:
        return
    subs = dict.fromkeys(members, topics)
    before = sticky_assign(subs, ppt)
    grown = {**subs, newcomer: topics}
    after = sticky_plan(grown, ppt, before, dict.fromkeys(members, GEN))
    check_valid(grown, ppt, after.assignment)
    assert fully_balanced(after.assignment)

    moved = {tp for m in members for tp in before[m] if tp not in after.assignment[m]}
    # Every partition that moves goes to the newcomer, none is shuffled among old members.
    assert moved == set(after.assignment[newcomer])
    assert set(after.transferring or {}) == moved
    # And no fewer could move: old members keep at most maxQuota, and only T % (N+1) of them.
    total = sum(len(v) for v in before.values())
    n = len(grown)
    min_q, extra = divmod(total, n)
    at_or_above_max = sum(1 for m in members if len(before[m]) >= min_q + 1)
    kept_max = sum(min(len(before[m]), min_q) for m in members) + (
        min(extra, at_or_above_max) if extra else 0
    )
    assert len(moved) == total - kept_max


@PROPS
@given(members_st, ppt_st, topics_st, st.data())
def test_member_removed_survivors_keep_everything(
    members: list[str], ppt: dict[str, int], topics: list[str], data: st.DataObject
) -> None:
    if len(members) < 2:
        return
    subs = dict.fromkeys(members, topics)
    before = sticky_assign(subs, ppt)
    leaver = data.draw(st.sampled_from(members))
    rest = {m: topics for m in members if m != leaver}
    after = sticky_plan(rest, ppt, {m: before[m] for m in rest}, dict.fromkeys(rest, GEN))
    check_valid(rest, ppt, after.assignment)
    assert fully_balanced(after.assignment)
    for m in rest:
        assert set(before[m]) <= set(after.assignment[m])
    assert after.transferring == {}


@PROPS
@given(members_st, ppt_st, topics_st, st.data())
def test_stale_claims_change_nothing_on_the_constrained_path(
    members: list[str], ppt: dict[str, int], topics: list[str], data: st.DataObject
) -> None:
    subs = dict.fromkeys(members, topics)
    owned = sticky_assign(subs, ppt)
    gens = dict.fromkeys(members, 7)
    baseline = sticky_plan(subs, ppt, owned, gens)
    # A lower-generation member also claims partitions that others own: higher generation wins.
    stale_member = data.draw(st.sampled_from(members))
    stolen = [tp for m in members if m != stale_member for tp in owned[m]]
    noisy = {**owned, stale_member: owned[stale_member] + stolen}
    plan = sticky_plan(subs, ppt, noisy, {**gens, stale_member: 3})
    assert plan.assignment == sticky_plan(subs, ppt, owned, {**gens, stale_member: 3}).assignment
    assert baseline.transferring == {}


@PROPS
@given(members_st, ppt_st, topics_st, st.data())
def test_same_generation_double_claims_are_owned_by_nobody(
    members: list[str], ppt: dict[str, int], topics: list[str], data: st.DataObject
) -> None:
    if len(members) < 2:
        return
    subs = dict.fromkeys(members, topics)
    owned = sticky_assign(subs, ppt)
    a, b = data.draw(st.permutations(members))[:2]
    if not owned[a]:
        return
    contested = owned[a][0]
    gens = dict.fromkeys(members, 4)
    doubled = {**owned, b: [*owned[b], contested]}
    plan = sticky_plan(subs, ppt, doubled, gens)
    without = {**owned, a: owned[a][1:]}
    reference = sticky_plan(subs, ppt, without, gens)
    assert plan.assignment == reference.assignment
    assert plan.transferring is not None
    assert contested in plan.transferring


def test_hash_order_decides_who_keeps_max_quota() -> None:
    # Same inputs, only the member insertion order differs: Kafka's choice follows the
    # HashMap built in that order, which here is the same (distinct buckets).
    both = [topic1, topic2]
    owned = {c1: tps("topic1-0", "topic2-0"), c2: tps("topic1-1", "topic2-1"), c3: []}
    forward = sticky_assign({c1: both, c2: both, c3: both}, {topic1: 2, topic2: 2}, owned)
    backward = sticky_assign({c3: both, c2: both, c1: both}, {topic1: 2, topic2: 2}, owned)
    assert forward == backward
