"""RoundRobinAssignor: Kafka's RoundRobinAssignorTest vectors and properties."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.assignors import ASSIGNORS, roundrobin_assign

from .support import TP, check_valid, tps

# --------------------------------------------------------------------------- Kafka vectors


def test_one_consumer_no_topic() -> None:
    assert roundrobin_assign({"consumer": []}, {}) == {"consumer": []}


def test_one_consumer_nonexistent_topic() -> None:
    assert roundrobin_assign({"consumer": ["topic"]}, {}) == {"consumer": []}


def test_one_consumer_one_topic() -> None:
    got = roundrobin_assign({"consumer": ["topic"]}, {"topic": 3})
    assert got == {"consumer": tps("topic-0", "topic-1", "topic-2")}


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    got = roundrobin_assign({"consumer": ["topic"]}, {"topic": 3, "other": 3})
    assert got == {"consumer": tps("topic-0", "topic-1", "topic-2")}


def test_one_consumer_multiple_topics() -> None:
    got = roundrobin_assign({"consumer": ["topic1", "topic2"]}, {"topic1": 1, "topic2": 2})
    assert got == {"consumer": tps("topic1-0", "topic2-0", "topic2-1")}


def test_two_consumers_one_topic_one_partition() -> None:
    got = roundrobin_assign({"consumer1": ["topic"], "consumer2": ["topic"]}, {"topic": 1})
    assert got == {"consumer1": tps("topic-0"), "consumer2": []}


def test_two_consumers_one_topic_two_partitions() -> None:
    got = roundrobin_assign({"consumer1": ["topic"], "consumer2": ["topic"]}, {"topic": 2})
    assert got == {"consumer1": tps("topic-0"), "consumer2": tps("topic-1")}


def test_multiple_consumers_mixed_topics() -> None:
    subs = {
        "consumer1": ["topic1"],
        "consumer2": ["topic1", "topic2"],
        "consumer3": ["topic1"],
    }
    got = roundrobin_assign(subs, {"topic1": 3, "topic2": 2})
    assert got == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1", "topic2-0", "topic2-1"),
        "consumer3": tps("topic1-2"),
    }


def test_two_dynamic_consumers_two_topics_six_partitions() -> None:
    subs = {"consumer1": ["topic1", "topic2"], "consumer2": ["topic1", "topic2"]}
    got = roundrobin_assign(subs, {"topic1": 3, "topic2": 3})
    assert got == {
        "consumer1": tps("topic1-0", "topic1-2", "topic2-1"),
        "consumer2": tps("topic1-1", "topic2-0", "topic2-2"),
    }


def test_two_static_consumers_compare_on_instance_id() -> None:
    subs = {"consumer-b": ["topic1", "topic2"], "consumer-a": ["topic1", "topic2"]}
    got = roundrobin_assign(
        subs,
        {"topic1": 3, "topic2": 3},
        group_instance_ids={"consumer-b": "instance1", "consumer-a": "instance2"},
    )
    assert got == {
        "consumer-b": tps("topic1-0", "topic1-2", "topic2-1"),
        "consumer-a": tps("topic1-1", "topic2-0", "topic2-2"),
    }


def test_static_consumer_sorts_before_dynamic_consumer() -> None:
    subs = {"consumer-b": ["topic1", "topic2"], "consumer-a": ["topic1", "topic2"]}
    got = roundrobin_assign(
        subs, {"topic1": 3, "topic2": 3}, group_instance_ids={"consumer-b": "instance1"}
    )
    assert got["consumer-b"] == tps("topic1-0", "topic1-2", "topic2-1")
    assert got["consumer-a"] == tps("topic1-1", "topic2-0", "topic2-2")


def test_static_member_assignment_persistent() -> None:
    both = ["topic1", "topic2"]
    ppt = {"topic1": 3, "topic2": 3}
    instance_ids: dict[str, str | None] = {
        "consumer1": "instance1",
        "consumer2": "instance2",
        "consumer3": "instance3",
    }
    subs = {"consumer1": both, "consumer2": both, "consumer3": both, "consumer4": both}
    expected = {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic1-1", "topic2-2"),
        "consumer3": tps("topic1-2"),
        "consumer4": tps("topic2-0"),
    }
    assert roundrobin_assign(subs, ppt, group_instance_ids=instance_ids) == expected
    del subs["consumer4"]
    subs["consumer5"] = both
    expected["consumer5"] = expected.pop("consumer4")
    assert roundrobin_assign(subs, ppt, group_instance_ids=instance_ids) == expected


def test_sticky_javadoc_example_two_round_robin_result() -> None:
    # StickyAssignor javadoc, example 2: what round robin does with unequal subscriptions.
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    got = roundrobin_assign(subs, {"t0": 1, "t1": 2, "t2": 3})
    assert got == {
        "C0": tps("t0-0"),
        "C1": tps("t1-0"),
        "C2": tps("t1-1", "t2-0", "t2-1", "t2-2"),
    }


def test_poor_round_robin_scenario_from_sticky_test() -> None:
    # AbstractStickyAssignorTest.testPoorRoundRobinAssignmentScenario's documented result.
    ppt = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    every = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    subs = {"consumer1": every, "consumer2": odd, "consumer3": odd, "consumer4": every}
    assert roundrobin_assign(subs, ppt) == {
        "consumer1": tps("topic1-0", "topic3-0", "topic5-0"),
        "consumer2": tps("topic1-1", "topic3-1", "topic5-1"),
        "consumer3": [],
        "consumer4": tps("topic2-0", "topic4-0"),
    }


def test_registry_entry() -> None:
    subs = {"a": ["t"], "b": ["t"]}
    got = ASSIGNORS["roundrobin"].assign(subs, {"t": 5}, group_instance_ids={"b": "i"})
    assert got == roundrobin_assign(subs, {"t": 5}, group_instance_ids={"b": "i"})
    assert got == {"a": tps("t-1", "t-3"), "b": tps("t-0", "t-2", "t-4")}


# --------------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "x"]
member_ids = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8, unique=True)
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 9), max_size=4)


def _reference(subs: Mapping[str, list[str]], ppt: Mapping[str, int]) -> dict[str, list[TP]]:
    """Deal sorted partitions to sorted members, skipping non-subscribers."""

    def jkey(s: str) -> bytes:
        return s.encode("utf-16-be", "surrogatepass")

    members = sorted(subs, key=jkey)
    out: dict[str, list[TP]] = {m: [] for m in subs}
    i = 0
    for topic in sorted({t for s in subs.values() for t in s}, key=jkey):
        for p in range(ppt.get(topic, 0)):
            while topic not in subs[members[i % len(members)]]:
                i += 1
            out[members[i % len(members)]].append((topic, p))
            i += 1
    return {m: sorted(v) for m, v in out.items()}


@given(member_ids, partition_counts, st.data())
def test_valid_and_matches_reference(
    members: list[str], ppt: dict[str, int], data: st.DataObject
) -> None:
    subs = {
        m: data.draw(st.lists(st.sampled_from(TOPICS), unique=True, max_size=4)) for m in members
    }
    got = roundrobin_assign(subs, ppt)
    check_valid(subs, ppt, got)
    assert got == _reference(subs, ppt)


@given(member_ids, partition_counts, st.lists(st.sampled_from(TOPICS), unique=True, max_size=4))
def test_equal_subscriptions_are_balanced(
    members: list[str], ppt: dict[str, int], topics: list[str]
) -> None:
    subs = dict.fromkeys(members, topics)
    got = roundrobin_assign(subs, ppt)
    check_valid(subs, ppt, got)
    sizes = [len(v) for v in got.values()]
    assert max(sizes) - min(sizes) <= 1


@given(member_ids, partition_counts, st.randoms(use_true_random=False))
def test_independent_of_member_insertion_order(
    members: list[str], ppt: dict[str, int], rnd: random.Random
) -> None:
    subs = {m: sorted(ppt) for m in members}
    shuffled_members = list(members)
    rnd.shuffle(shuffled_members)
    shuffled = {m: subs[m] for m in shuffled_members}
    assert roundrobin_assign(shuffled, ppt) == roundrobin_assign(subs, ppt)
