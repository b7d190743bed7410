"""Replica placement: Kafka's AdminUtils test vectors plus properties of the algorithm.

The fixed expectations come from Apache Kafka's own tests (``AdminTest`` /
``AdminRackAwareTest.testReplicaAssignment``,
``AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers``) and the
``AdminUtils`` Javadoc. The distribution checks port ``AdminRackAwareTest``'s
``assertReplicaDistribution`` cases; where Kafka uses a random start index we run every
possible (start index, replica shift) draw instead.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.controller.placement import (
    AdminOperationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas,
    rack_alternated_brokers,
    replica_index,
)


class ScriptedRandom(random.Random):
    """A Random whose ``randrange`` returns scripted values (and records the bounds)."""

    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self._values = list(values)
        self.bounds: list[int] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        assert stop is None
        assert step == 1
        self.bounds.append(start)
        value = self._values.pop(0)
        assert 0 <= value < start
        return value


def no_racks(ids: range | list[int]) -> dict[int, str | None]:
    return dict.fromkeys(ids)


def with_racks(racks: Mapping[int, str]) -> dict[int, str | None]:
    return dict(racks)


def all_draws(n: int) -> list[tuple[int, int]]:
    return [(start, shift) for start in range(n) for shift in range(n)]


# --------------------------------------------------------------------------------------
# Kafka's fixed test vectors
# --------------------------------------------------------------------------------------

# AdminTest.testReplicaAssignment / AdminRackAwareTest.testReplicaAssignment, also the
# table in AdminUtils' Javadoc: 5 brokers, 10 partitions, RF 3, fixed start index 0.
KAFKA_RACK_UNAWARE_5_10_3 = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
}

# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers and the
# AdminUtils Javadoc example.
KAFKA_RACK_MAP = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
KAFKA_RACK_AWARE_7_3 = {
    0: [0, 3, 1],
    1: [3, 1, 5],
    2: [1, 5, 4],
    3: [5, 4, 2],
    4: [4, 2, 0],
    5: [2, 0, 3],
    6: [0, 4, 2],
}


@pytest.mark.parametrize("start_partition_id", [-1, 0])
def test_kafka_rack_unaware_vector(start_partition_id: int) -> None:
    result = assign_replicas(
        no_racks(range(5)),
        10,
        3,
        fixed_start_index=0,
        start_partition_id=start_partition_id,
    )
    assert result == KAFKA_RACK_UNAWARE_5_10_3
    assert list(result) == list(range(10))


def test_kafka_javadoc_table_per_broker() -> None:
    """The Javadoc's table: which partitions each broker holds as 1st/2nd/3rd replica."""
    result = assign_replicas(no_racks(range(5)), 10, 3, fixed_start_index=0)
    rows = [
        [[p for p in result if result[p][pos] == b and p // 5 == half] for b in range(5)]
        for pos in range(3)
        for half in range(2)
    ]
    assert rows == [
        [[0], [1], [2], [3], [4]],
        [[5], [6], [7], [8], [9]],
        [[4], [0], [1], [2], [3]],
        [[8], [9], [5], [6], [7]],
        [[3], [4], [0], [1], [2]],
        [[7], [8], [9], [5], [6]],
    ]


def test_kafka_rack_unaware_vector_ignores_mapping_order() -> None:
    brokers = {4: None, 2: None, 0: None, 3: None, 1: None}
    assert assign_replicas(brokers, 10, 3, fixed_start_index=0) == KAFKA_RACK_UNAWARE_5_10_3


def test_kafka_rack_alternated_list() -> None:
    assert rack_alternated_brokers(KAFKA_RACK_MAP) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in KAFKA_RACK_MAP.items() if b != 5}
    assert rack_alternated_brokers(without_5) == [0, 3, 1, 4, 2]


def test_kafka_javadoc_rack_alternated_list() -> None:
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_brokers(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_kafka_rack_aware_vector() -> None:
    result = assign_replicas(
        with_racks(KAFKA_RACK_MAP), 7, 3, fixed_start_index=0, start_partition_id=0
    )
    assert result == KAFKA_RACK_AWARE_7_3


def test_kafka_rack_aware_vector_first_six_partitions() -> None:
    """The Javadoc's "6 partitions with replication factor of 3" round."""
    result = assign_replicas(with_racks(KAFKA_RACK_MAP), 6, 3, fixed_start_index=0)
    assert result == {p: KAFKA_RACK_AWARE_7_3[p] for p in range(6)}


def test_rack_aware_explicit_flag_matches_auto() -> None:
    auto = assign_replicas(with_racks(KAFKA_RACK_MAP), 7, 3, fixed_start_index=0)
    forced = assign_replicas(with_racks(KAFKA_RACK_MAP), 7, 3, fixed_start_index=0, rack_aware=True)
    assert auto == forced == KAFKA_RACK_AWARE_7_3


def test_rack_unaware_flag_ignores_racks() -> None:
    result = assign_replicas(
        with_racks(KAFKA_RACK_MAP), 7, 3, fixed_start_index=0, rack_aware=False
    )
    assert result == assign_replicas(no_racks(range(6)), 7, 3, fixed_start_index=0)
    assert result != KAFKA_RACK_AWARE_7_3


def test_hand_computed_unaware_with_distinct_start_and_shift() -> None:
    """3 brokers, start index 2, replica shift 1 (docs/architecture.md#placement)."""
    rng = ScriptedRandom(2, 1)
    result = assign_replicas(no_racks([0, 1, 2]), 6, 3, rng=rng)
    assert rng.bounds == [3, 3]
    # p0-p2: shift 1; p3 bumps the shift to 2.
    assert result == {
        0: [2, 1, 0],
        1: [0, 2, 1],
        2: [1, 0, 2],
        3: [2, 0, 1],
        4: [0, 1, 2],
        5: [1, 2, 0],
    }


def test_start_partition_id_does_not_catch_up_the_shift() -> None:
    """Like Kafka, the shift only grows at multiples of n met while placing."""
    result = assign_replicas(no_racks(range(5)), 3, 3, fixed_start_index=0, start_partition_id=7)
    # Partition 7 with shift 0 (no multiple of 5 passed since 7): first index 2.
    assert result == {7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}
    crossing = assign_replicas(no_racks(range(5)), 3, 3, fixed_start_index=0, start_partition_id=9)
    # Partition 10 is a multiple of 5 > 0: the shift becomes 1 there.
    assert crossing == {9: [4, 0, 1], 10: [0, 2, 3], 11: [1, 3, 4]}


def test_replica_index_formula() -> None:
    assert replica_index(0, 0, 0, 5) == 1
    assert replica_index(4, 0, 0, 5) == 0
    assert replica_index(0, 1, 0, 5) == 2
    assert replica_index(3, 4, 1, 5) == 0  # 1 + (4 + 1) % 4 = 2 positions after index 3
    assert all(replica_index(f, s, j, 7) != f for f in range(7) for s in range(9) for j in range(6))


# --------------------------------------------------------------------------------------
# AdminRackAwareTest distribution checks
# --------------------------------------------------------------------------------------


def check_distribution(
    assignment: dict[int, list[int]],
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    *,
    rack_aware: bool = True,
    leaders: bool = True,
    replicas: bool = True,
) -> None:
    """Port of Kafka's ``assertReplicaDistribution``."""
    num_brokers = len(racks)
    assert len(assignment) == num_partitions
    for replica_list in assignment.values():
        assert len(replica_list) == replication_factor
        assert len(set(replica_list)) == len(replica_list)
    if rack_aware:
        for replica_list in assignment.values():
            assert len({racks[b] for b in replica_list}) == replication_factor
    if leaders:
        counts = Counter(replica_list[0] for replica_list in assignment.values())
        assert counts == dict.fromkeys(racks, num_partitions // num_brokers)
    if replicas:
        counts = Counter(b for replica_list in assignment.values() for b in replica_list)
        assert counts == dict.fromkeys(racks, num_partitions * replication_factor // num_brokers)


EVEN_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def test_assignment_with_rack_aware() -> None:
    result = assign_replicas(
        with_racks(EVEN_RACKS), 6, 3, fixed_start_index=2, start_partition_id=0
    )
    check_distribution(result, EVEN_RACKS, 6, 3)


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_assignment_with_rack_aware_any_start_index(start: int, shift: int) -> None:
    result = assign_replicas(with_racks(EVEN_RACKS), 6, 3, rng=ScriptedRandom(start, shift))
    check_distribution(result, EVEN_RACKS, 6, 3)


def test_assignment_with_rack_aware_uneven_replicas() -> None:
    result = assign_replicas(
        with_racks(EVEN_RACKS), 13, 3, fixed_start_index=0, start_partition_id=0
    )
    check_distribution(result, EVEN_RACKS, 13, 3, leaders=False, replicas=False)


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_assignment_with_rack_aware_uneven_racks(start: int, shift: int) -> None:
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    result = assign_replicas(with_racks(racks), 12, 3, rng=ScriptedRandom(start, shift))
    check_distribution(result, racks, 12, 3, replicas=False)


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_assignment_with_2_replicas_rack_aware(start: int, shift: int) -> None:
    result = assign_replicas(with_racks(EVEN_RACKS), 12, 2, rng=ScriptedRandom(start, shift))
    check_distribution(result, EVEN_RACKS, 12, 2)


EXPANSION_RACKS = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_rack_aware_expansion(start: int, shift: int) -> None:
    result = assign_replicas(
        with_racks(EXPANSION_RACKS),
        12,
        2,
        start_partition_id=12,
        rng=ScriptedRandom(start, shift),
    )
    assert list(result) == list(range(12, 24))
    check_distribution(result, EXPANSION_RACKS, 12, 2)


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_assignment_with_2_replicas_rack_aware_6_partitions(start: int, shift: int) -> None:
    result = assign_replicas(with_racks(EXPANSION_RACKS), 6, 2, rng=ScriptedRandom(start, shift))
    check_distribution(result, EXPANSION_RACKS, 6, 2)


@pytest.mark.parametrize(("start", "shift"), all_draws(3))
def test_assignment_with_2_replicas_3_brokers(start: int, shift: int) -> None:
    racks = {0: "rack1", 1: "rack2", 4: "rack3"}
    result = assign_replicas(with_racks(racks), 3, 2, rng=ScriptedRandom(start, shift))
    check_distribution(result, racks, 3, 2)


LARGE_RACKS = {
    0: "rack1",
    1: "rack2",
    2: "rack2",
    3: "rack3",
    4: "rack3",
    5: "rack1",
    6: "rack1",
    7: "rack2",
    8: "rack2",
    9: "rack3",
    10: "rack1",
    11: "rack3",
}


@pytest.mark.parametrize("seed", range(20))
def test_large_number_partitions_assignment(seed: int) -> None:
    result = assign_replicas(with_racks(LARGE_RACKS), 96, 3, rng=random.Random(seed))
    check_distribution(result, LARGE_RACKS, 96, 3)


def test_large_number_partitions_assignment_every_draw() -> None:
    for start, shift in all_draws(12):
        result = assign_replicas(with_racks(LARGE_RACKS), 96, 3, rng=ScriptedRandom(start, shift))
        check_distribution(result, LARGE_RACKS, 96, 3)


UNEVEN_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_more_replicas_than_racks(start: int, shift: int) -> None:
    result = assign_replicas(with_racks(UNEVEN_RACKS), 6, 5, rng=ScriptedRandom(start, shift))
    for replica_list in result.values():
        assert len(replica_list) == 5
        assert len(set(replica_list)) == 5
        assert len({UNEVEN_RACKS[b] for b in replica_list}) == 3


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_less_replicas_than_racks(start: int, shift: int) -> None:
    result = assign_replicas(with_racks(UNEVEN_RACKS), 6, 2, rng=ScriptedRandom(start, shift))
    for replica_list in result.values():
        assert len(replica_list) == 2
        assert len({UNEVEN_RACKS[b] for b in replica_list}) == 2


@pytest.mark.parametrize(("start", "shift"), all_draws(6))
def test_single_rack(start: int, shift: int) -> None:
    racks = dict.fromkeys(range(6), "rack1")
    result = assign_replicas(with_racks(racks), 6, 3, rng=ScriptedRandom(start, shift))
    for replica_list in result.values():
        assert len(replica_list) == 3
        assert len(set(replica_list)) == 3
    assert Counter(replica_list[0] for replica_list in result.values()) == dict.fromkeys(racks, 1)


def test_skip_broker_with_replica_already_assigned() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    result = assign_replicas(with_racks(racks), 6, 4, fixed_start_index=2)
    check_distribution(result, racks, 6, 4, rack_aware=False, leaders=False, replicas=False)
    for replica_list in result.values():
        assert len({racks[b] for b in replica_list}) == 3


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def test_replication_factor_zero() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0"):
        assign_replicas(no_racks(range(5)), 10, 0)


def test_replication_factor_negative() -> None:
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(no_racks(range(5)), 10, -1)


def test_replication_factor_above_broker_count() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"6 larger than available brokers: 5"):
        assign_replicas(no_racks(range(5)), 10, 6)


def test_no_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="no brokers"):
        assign_replicas({}, 1, 1)


@pytest.mark.parametrize("num_partitions", [0, -3])
def test_partitions_not_positive(num_partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError, match="larger than 0"):
        assign_replicas(no_racks(range(3)), num_partitions, 1)


def test_partitions_checked_before_replication_factor() -> None:
    """Kafka's testAssignReplicasToBrokersWithInvalidParameters: 0 partitions, RF 0."""
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(no_racks(range(3)), 0, 0)


def test_mixed_racks_rejected() -> None:
    """Kafka's testAssignReplicasToBrokersWithInvalidParameters: broker 4 has no rack."""
    brokers: dict[int, str | None] = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None}
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers, 0, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 6)
    with pytest.raises(AdminOperationError, match=r"\[4\] have no rack"):
        assign_replicas(brokers, 10, 5)


def test_mixed_racks_allowed_when_rack_unaware_requested() -> None:
    brokers: dict[int, str | None] = {0: "rack1", 1: None, 2: "rack2", 3: None, 4: "rack1"}
    result = assign_replicas(brokers, 10, 3, fixed_start_index=0, rack_aware=False)
    assert result == KAFKA_RACK_UNAWARE_5_10_3


def test_rack_aware_requested_without_racks() -> None:
    with pytest.raises(AdminOperationError, match="rack-aware placement was requested"):
        assign_replicas(no_racks(range(3)), 3, 2, rack_aware=True)


def test_rack_aware_requested_with_partial_racks() -> None:
    with pytest.raises(AdminOperationError, match=r"\[1\]"):
        assign_replicas({0: "a", 1: None, 2: "b"}, 3, 2, rack_aware=True)


def test_errors_are_value_errors() -> None:
    for error in (AdminOperationError, InvalidPartitionsError, InvalidReplicationFactorError):
        assert issubclass(error, ValueError)


# --------------------------------------------------------------------------------------
# Randomness
# --------------------------------------------------------------------------------------


def test_rng_draws_start_then_shift() -> None:
    rng = ScriptedRandom(3, 1)
    result = assign_replicas(no_racks(range(5)), 5, 3, rng=rng)
    assert rng.bounds == [5, 5]
    # Start index 3 places partition 0 first on broker 3; shift 1 puts its second
    # replica 1 + (1 % 4) = 2 positions after that.
    assert result[0] == [3, 0, 1]


def test_fixed_start_index_does_not_use_rng() -> None:
    rng = ScriptedRandom()
    assign_replicas(no_racks(range(5)), 5, 3, fixed_start_index=1, rng=rng)
    assign_replicas(with_racks(EVEN_RACKS), 5, 3, fixed_start_index=1, rng=rng)
    assert rng.bounds == []


def test_default_rng_gives_valid_assignment() -> None:
    result = assign_replicas(no_racks(range(4)), 8, 2)
    assert sorted(result) == list(range(8))
    assert Counter(r[0] for r in result.values()) == dict.fromkeys(range(4), 2)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_equal_draws_match_fixed_start_index(n: int) -> None:
    for s in range(n):
        for brokers in (no_racks(range(n)), with_racks({b: f"r{b % 2}" for b in range(n)})):
            scripted = assign_replicas(brokers, 2 * n + 1, min(n, 2), rng=ScriptedRandom(s, s))
            fixed = assign_replicas(brokers, 2 * n + 1, min(n, 2), fixed_start_index=s)
            assert scripted == fixed


def test_single_broker() -> None:
    assert assign_replicas({7: None}, 3, 1) == {0: [7], 1: [7], 2: [7]}
    assert assign_replicas({7: "r"}, 2, 1) == {0: [7], 1: [7]}


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


@st.composite
def placement_requests(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 60))
    start_index = draw(st.integers(0, 3 * len(ids)))
    start_partition = draw(st.integers(-1, 40))
    return ids, rf, partitions, start_index, start_partition


@given(placement_requests())
@settings(max_examples=300)
def test_property_rack_unaware(request: tuple[list[int], int, int, int, int]) -> None:
    ids, rf, partitions, start_index, start_partition = request
    n = len(ids)
    ordered = sorted(ids)
    result = assign_replicas(
        no_racks(ids),
        partitions,
        rf,
        fixed_start_index=start_index,
        start_partition_id=start_partition,
    )
    first_id = max(0, start_partition)
    assert list(result) == list(range(first_id, first_id + partitions))
    for p, replicas in result.items():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
        # The first replica walks the sorted broker list round-robin.
        assert replicas[0] == ordered[(p + start_index) % n]
    # Preferred leaders are spread within one of each other.
    leaders = Counter(r[0] for r in result.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    if partitions % n == 0:
        assert set(counts) == {partitions // n}
        if first_id % n == 0:
            # Whole rounds with a constant shift: every broker holds as many replicas.
            replicas_per_broker = Counter(b for r in result.values() for b in r)
            assert set(replicas_per_broker.values()) == {partitions * rf // n}
            assert len(replicas_per_broker) == n


@given(placement_requests(), st.integers(0, 2**32))
def test_property_seeded_rng_is_deterministic(
    request: tuple[list[int], int, int, int, int], seed: int
) -> None:
    ids, rf, partitions, _, start_partition = request
    brokers = no_racks(ids)
    a = assign_replicas(
        brokers, partitions, rf, start_partition_id=start_partition, rng=random.Random(seed)
    )
    b = assign_replicas(
        brokers, partitions, rf, start_partition_id=start_partition, rng=random.Random(seed)
    )
    assert a == b


@st.composite
def rack_requests(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    rack_names = draw(st.lists(st.sampled_from("abcdefg"), min_size=len(ids), max_size=len(ids)))
    racks = dict(zip(ids, rack_names, strict=True))
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 40))
    start_index = draw(st.integers(0, 2 * len(ids)))
    start_partition = draw(st.integers(-1, 30))
    return racks, rf, partitions, start_index, start_partition


@given(rack_requests())
@settings(max_examples=300)
def test_property_rack_aware(request: tuple[dict[int, str], int, int, int, int]) -> None:
    racks, rf, partitions, start_index, start_partition = request
    n = len(racks)
    num_racks = len(set(racks.values()))
    arranged = rack_alternated_brokers(racks)
    result = assign_replicas(
        with_racks(racks),
        partitions,
        rf,
        fixed_start_index=start_index,
        start_partition_id=start_partition,
    )
    first_id = max(0, start_partition)
    assert list(result) == list(range(first_id, first_id + partitions))
    for p, replicas in result.items():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(racks)
        # Replicas cover as many racks as they can.
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)
        # The first replica walks the rack-alternated list round-robin.
        assert replicas[0] == arranged[(p + start_index) % n]
    leaders = Counter(r[0] for r in result.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1


@given(st.dictionaries(st.integers(0, 1000), st.sampled_from("abcdef"), max_size=20))
def test_property_rack_alternated_list(racks: dict[int, str]) -> None:
    result = rack_alternated_brokers(racks)
    assert sorted(result) == sorted(racks)
    rack_order = sorted(set(racks.values()))
    # The first round takes the lowest broker of each rack, racks in sorted order.
    assert result[: len(rack_order)] == [
        min(b for b in racks if racks[b] == rack) for rack in rack_order
    ]
    # Within a rack, brokers keep ascending order.
    for rack in rack_order:
        members = [b for b in result if racks[b] == rack]
        assert members == sorted(members)
    # While every rack still has brokers left, consecutive picks cycle through the racks.
    smallest = min((sum(1 for r in racks.values() if r == rack) for rack in rack_order), default=0)
    full_rounds = result[: smallest * len(rack_order)]
    assert [racks[b] for b in full_rounds] == rack_order * smallest


@given(rack_requests())
def test_property_rack_unaware_flag_equals_stripped_racks(
    request: tuple[dict[int, str], int, int, int, int],
) -> None:
    racks, rf, partitions, start_index, start_partition = request
    assert assign_replicas(
        with_racks(racks),
        partitions,
        rf,
        fixed_start_index=start_index,
        start_partition_id=start_partition,
        rack_aware=False,
    ) == assign_replicas(
        no_racks(list(racks)),
        partitions,
        rf,
        fixed_start_index=start_index,
        start_partition_id=start_partition,
    )
