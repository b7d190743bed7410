"""Kafka's ``StickyAssignor`` (protocol name ``"sticky"``), i.e. ``AbstractStickyAssignor``.

Reproduces the Kafka 3.5+ ``AbstractStickyAssignor`` (``ConstrainedAssignmentBuilder`` and
``GeneralAssignmentBuilder``) without rack awareness. Goals, in priority order: the assignment
is as balanced as possible, then as many previously owned partitions as possible stay put.

**Previous ownership and generations** (``allSubscriptionsEqual``). Members are visited in Java
``HashMap`` order. Owned partitions of topics that no longer take part are dropped. When two
members claim the same partition, the one with the higher generation keeps it; when both have
the same generation, neither keeps it (it is "claimed by multiple previous owners"). A member
without a generation has ``DEFAULT_GENERATION`` (-1).

**Constrained path** (every member subscribes to the same topics). With ``T`` partitions and
``N`` members, ``minQuota = T // N``, ``maxQuota = ceil(T / N)`` and exactly ``T % N`` members
end with ``maxQuota``. In Java ``HashMap`` order, each member keeps its owned partitions, taken
in (partition, topic) order: all of them if fewer than ``minQuota``; ``maxQuota`` of them while
fewer than ``T % N`` members have taken ``maxQuota``; otherwise ``minQuota``. The rest of its
owned partitions are revoked. The unassigned partitions, in (topic, partition) order, are then
dealt round-robin to the members under ``minQuota`` (sorted by member id, Java ``String``
order) and, once those are full, one each to the members at ``minQuota`` that may still take
one more (also sorted by member id). This path is deterministic and matches Kafka exactly,
including which members keep ``maxQuota`` (hash-order tie-break).

**General path** (subscriptions differ). Owned partitions that are still valid stay; the others
are assigned one at a time, in order of (number of subscribed members, topic, partition), to the
member with the fewest partitions (ties by member id); then partitions are moved from members
with 2+ more partitions than another subscriber, trying the previous owner of an older
generation first, until Kafka's balance check passes; the moves are kept only if they improve
the balance score (or nothing was owned before). Tie-breaking follows Kafka, including its
``PartitionMovements`` bookkeeping (which may move a sibling partition of the same topic instead
of the one examined, chosen as the first element of a Java ``HashSet``).

Deliberate divergences from Kafka (each only for inputs Kafka itself mishandles):

- A member's previous owner (``prevAssignment``) is only used as a move target if it still
  participates and still subscribes to the topic; Kafka would throw a ``NullPointerException``
  or hand the partition to a member not subscribed to it.
- Owned partitions whose number is outside ``[0, count)`` are ignored (Kafka would keep a
  partition that no longer exists and could then assign another one twice).
- Subscriptions are compared as sets, and an empty subscription is not equal to a non-empty one
  (Kafka's check is order-dependent when the first member it looks at subscribes to nothing).
- Kafka caches the highest generation seen on the assignor instance across rebalances; here it
  is the highest generation among the current inputs.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kafkacoord.coordinator.groups.assignors.common import (
    DEFAULT_GENERATION,
    Assignment,
    Generations,
    OwnedPartitions,
    PartitionsPerTopic,
    Subscriptions,
    TopicPartition,
    finalize_assignment,
    member_topics,
    normalize_partitions_per_topic,
)
from kafkacoord.coordinator.groups.assignors.javacompat import (
    JavaHashSet,
    java_hashmap_order,
    java_string_key,
    topic_partition_hash,
)
from kafkacoord.coordinator.groups.partitioning import java_string_hash

__all__ = ["StickyPlan", "sticky_assign", "sticky_plan"]


@dataclass(frozen=True)
class StickyPlan:
    """The sticky assignment plus what the cooperative protocol needs to know about it.

    ``transferring`` maps each partition that the constrained path moved away from a previous
    owner (or that several members claimed in the same generation) to its new owner; it is
    ``None`` when the general path ran (Kafka then recomputes it from the owned partitions).
    """

    assignment: Assignment
    transferring: Mapping[TopicPartition, str] | None
    constrained: bool


# --------------------------------------------------------------------------- input handling


def _owned_lists(
    members: list[str], owned: OwnedPartitions | None
) -> dict[str, list[TopicPartition]]:
    """Each member's owned partitions, de-duplicated, in the order given."""
    out: dict[str, list[TopicPartition]] = {}
    source = owned or {}
    for member in members:
        claims = source.get(member, ())
        if isinstance(claims, str):
            raise TypeError(f"owned partitions of member {member!r} must be (topic, partition)s")
        seen: dict[TopicPartition, None] = {}
        for tp in claims:
            topic, partition = tp
            seen[(topic, partition)] = None
        out[member] = list(seen)
    return out


def _generations(members: list[str], generations: Generations | None) -> dict[str, int]:
    source = generations or {}
    out: dict[str, int] = {}
    for member in members:
        gen = source.get(member, DEFAULT_GENERATION)
        if isinstance(gen, bool) or not isinstance(gen, int):
            raise ValueError(f"generation of member {member!r} must be an int, got {gen!r}")
        out[member] = gen
    return out


class _Ownership(NamedTuple):
    owned: dict[str, list[TopicPartition]]  # valid previous ownership, Java HashMap order
    multiply_claimed: set[TopicPartition]
    max_generation: int


def _resolve_ownership(
    java_order: list[str],
    topics: Mapping[str, int],
    owned_raw: Mapping[str, list[TopicPartition]],
    gens: Mapping[str, int],
) -> _Ownership:
    """The ownership part of Kafka's ``allSubscriptionsEqual``."""
    owned: dict[str, list[TopicPartition]] = {}
    owner_of: dict[TopicPartition, str] = {}
    multiply_claimed: set[TopicPartition] = set()
    max_generation = DEFAULT_GENERATION
    for member in java_order:
        gen = gens[member]
        max_generation = max(max_generation, gen)
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in owned_raw[member]:
            count = topics.get(tp[0])
            if count is None or not 0 <= tp[1] < count:
                continue
            other = owner_of.get(tp)
            if other is None:
                mine.append(tp)
                owner_of[tp] = member
                continue
            other_gen = gens[other]
            if gen == other_gen:
                # Same generation: invalidate the partition for both claimants.
                multiply_claimed.add(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner_of[tp] = member
            elif gen > other_gen:
                mine.append(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner_of[tp] = member
            # else: the other member's newer claim stands.
    return _Ownership(owned, multiply_claimed, max_generation)


# --------------------------------------------------------------------------- constrained path


def _constrained_assign(
    topics: Mapping[str, int],
    ownership: _Ownership,
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """Kafka's ``ConstrainedAssignmentBuilder.build`` (no racks)."""
    owned = ownership.owned
    multiply_claimed = ownership.multiply_claimed
    total = sum(topics.values())
    num_members = len(owned)
    min_quota, extra = divmod(total, num_members)
    max_quota = min_quota + (1 if extra else 0)
    expected_over_min = extra
    current_over_min = 0

    assignment: dict[str, list[TopicPartition]] = {member: [] for member in owned}
    assigned: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    under_min: list[str] = []
    exactly_min: list[str] = []

    for member, claims in owned.items():  # Java HashMap order
        mine = sorted(
            (tp for tp in claims if tp not in multiply_claimed),
            key=lambda tp: (tp[1], java_string_key(tp[0])),
        )
        if len(mine) < min_quota:
            assignment[member].extend(mine)
            assigned.update(mine)
            under_min.append(member)
        elif len(mine) >= max_quota and current_over_min < expected_over_min:
            current_over_min += 1
            if current_over_min == expected_over_min:
                exactly_min.clear()
            assignment[member].extend(mine[:max_quota])
            assigned.update(mine[:max_quota])
            revoked.update(mine[max_quota:])
        else:
            assignment[member].extend(mine[:min_quota])
            assigned.update(mine[:min_quota])
            revoked.update(mine[min_quota:])
            if current_over_min < expected_over_min:
                exactly_min.append(member)

    unassigned = [
        (topic, p)
        for topic in sorted(topics, key=java_string_key)
        for p in range(topics[topic])
        if (topic, p) not in assigned
    ]
    under_min.sort(key=java_string_key)
    exactly_min.sort(key=java_string_key)

    transferring: dict[TopicPartition, str] = {}
    # Round-robin over the members under minQuota (Kafka's iterator over a LinkedList that
    # drops a member once it reaches minQuota), then one each to members at minQuota.
    cursor = 0
    for tp in unassigned:
        from_under = True
        if cursor < len(under_min):
            member = under_min[cursor]
            cursor += 1
        elif not under_min and not exactly_min:
            raise AssertionError("sticky assignor: no unfilled member left for " + repr(tp))
        elif not under_min:
            member = exactly_min.pop(0)
            from_under = False
        else:
            member = under_min[0]
            cursor = 1
        assignment[member].append(tp)
        if tp in revoked or tp in multiply_claimed:
            transferring[tp] = member
        count = len(assignment[member])
        if count == min_quota:
            if not from_under:
                raise AssertionError("sticky assignor: member at minQuota was not filled yet")
            cursor -= 1
            del under_min[cursor]
            exactly_min.append(member)
        elif count == max_quota:
            current_over_min += 1

    if under_min and current_over_min != expected_over_min:
        raise AssertionError("sticky assignor: members left below minQuota")
    for member in under_min:
        if len(assignment[member]) != min_quota:
            raise AssertionError(f"sticky assignor: member {member!r} below minQuota")
    return assignment, transferring


# --------------------------------------------------------------------------- general path


class _PrevOwner(NamedTuple):
    member: str
    generation: int


class _PartitionMovements:
    """Kafka's ``AbstractStickyAssignor.PartitionMovements``."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[tuple[str, str], JavaHashSet[TopicPartition]]] = {}
        self._moves: dict[TopicPartition, tuple[str, str]] = {}  # partition -> (src, dst)

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self._moves.pop(tp)
        topic_moves = self._by_topic[tp[0]]
        partitions = topic_moves[pair]
        partitions.discard(tp)
        if not partitions:
            del topic_moves[pair]
        if not topic_moves:
            del self._by_topic[tp[0]]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self._moves[tp] = pair
        topic_moves = self._by_topic.setdefault(tp[0], {})
        partitions = topic_moves.get(pair)
        if partitions is None:
            partitions = JavaHashSet(topic_partition_hash)
            topic_moves[pair] = partitions
        partitions.add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self._moves:
            src, _dst = self._remove_record(tp)
            if src != new:
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        """Kafka's ``getTheActualPartitionToBeMoved``: undo a reverse move of the same topic."""
        topic_moves = self._by_topic.get(tp[0])
        if topic_moves is None:
            return tp
        if tp in self._moves:
            old = self._moves[tp][0]
        reverse = topic_moves.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


class _SortedMembers:
    """Kafka's ``TreeSet<String>`` ordered by (assignment size, member id)."""

    def __init__(self, assignment: dict[str, list[TopicPartition]]) -> None:
        self._assignment = assignment
        self._keys: list[tuple[int, bytes, str]] = []

    def _key(self, member: str) -> tuple[int, bytes, str]:
        return (len(self._assignment[member]), java_string_key(member), member)

    def add(self, member: str) -> None:
        insort(self._keys, self._key(member))

    def remove(self, member: str) -> None:
        """Call before the member's assignment size changes."""
        key = self._key(member)
        i = bisect_left(self._keys, key)
        if i == len(self._keys) or self._keys[i] != key:
            raise AssertionError(f"sticky assignor: {member!r} missing from the sorted members")
        del self._keys[i]

    def first(self) -> str:
        return self._keys[0][2]

    def last(self) -> str:
        return self._keys[-1][2]

    def __iter__(self) -> Iterator[str]:
        return iter([key[2] for key in self._keys])

    def __len__(self) -> int:
        return len(self._keys)


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    """Sum over member pairs of the difference in assignment sizes."""
    sizes = sorted(len(partitions) for partitions in assignment.values())
    n = len(sizes)
    return sum(size * (2 * i - (n - 1)) for i, size in enumerate(sizes))


class _GeneralAssignment:
    """Kafka's ``GeneralAssignmentBuilder`` (no racks)."""

    def __init__(
        self,
        topics: Mapping[str, int],
        topics_by_member: Mapping[str, frozenset[str]],
        java_order: list[str],
        *,
        ownership: _Ownership,
        owned_raw: Mapping[str, list[TopicPartition]],
        gens: Mapping[str, int],
    ) -> None:
        self.topics = topics
        self.topic_consumers: dict[str, list[str]] = {topic: [] for topic in topics}
        self.consumer_topics: dict[str, frozenset[str]] = {}
        for member in java_order:
            subscribed = frozenset(t for t in topics_by_member[member] if t in topics)
            self.consumer_topics[member] = subscribed
            for topic in subscribed:
                self.topic_consumers[topic].append(member)
        self.current: dict[str, list[TopicPartition]] = {
            member: list(partitions) for member, partitions in ownership.owned.items()
        }
        self.partition_consumer: dict[TopicPartition, str] = {
            tp: member for member, partitions in self.current.items() for tp in partitions
        }
        sorted_topics = sorted(
            topics, key=lambda t: (len(self.topic_consumers[t]), java_string_key(t))
        )
        self.sorted_all_partitions = [(t, p) for t in sorted_topics for p in range(topics[t])]
        self.sorted_members = _SortedMembers(self.current)
        self.movements = _PartitionMovements()
        self.revocation_required = False
        self.max_sizes: dict[str, int] = {}
        self.prev_assignment = self._previous_assignment(
            java_order, owned_raw, gens, ownership.max_generation
        )

    @staticmethod
    def _previous_assignment(
        java_order: list[str],
        owned_raw: Mapping[str, list[TopicPartition]],
        gens: Mapping[str, int],
        max_generation: int,
    ) -> dict[TopicPartition, _PrevOwner]:
        """Kafka's ``prepopulateCurrentAssignments``: the latest older-generation owner."""
        prev: dict[TopicPartition, _PrevOwner] = {}
        for member in java_order:
            gen = gens[member]
            if gen >= max_generation:
                continue
            for tp in owned_raw[member]:
                existing = prev.get(tp)
                if existing is None or gen > existing.generation:
                    prev[tp] = _PrevOwner(member, gen)
        return prev

    # -- helpers ----------------------------------------------------------------------

    def _max_assignment_size(self, member: str) -> int:
        size = self.max_sizes.get(member)
        if size is None:
            size = sum(self.topics[t] for t in self.consumer_topics[member])
            self.max_sizes[member] = size
        return size

    def _can_participate(self, member: str) -> bool:
        partitions = self.current[member]
        if len(partitions) < self._max_assignment_size(member):
            return True
        return any(len(self.topic_consumers[tp[0]]) >= 2 for tp in partitions)

    def _is_balanced(self) -> bool:
        current = self.current
        smallest = len(current[self.sorted_members.first()])
        largest = len(current[self.sorted_members.last()])
        if smallest >= largest - 1:
            return True
        owner = self.partition_consumer  # in step with ``current`` once all are assigned
        for member in self.sorted_members:
            count = len(current[member])
            if count == self._max_assignment_size(member):
                continue
            for topic in self.consumer_topics[member]:
                for p in range(self.topics[topic]):
                    other = owner.get((topic, p))
                    if other is None or other == member:
                        continue
                    other_partitions = current.get(other)
                    if other_partitions is not None and count + 1 < len(other_partitions):
                        return False
        return True

    def _process_movement(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new)
        self.movements.move(tp, old, new)
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.partition_consumer[tp] = new
        self.sorted_members.add(new)
        self.sorted_members.add(old)

    def _reassign_to(self, tp: TopicPartition, new: str) -> None:
        consumer = self.partition_consumer[tp]
        self._process_movement(self.movements.partition_to_move(tp, consumer, new), new)

    def _reassign(self, tp: TopicPartition) -> None:
        for member in self.sorted_members:
            if tp[0] in self.consumer_topics[member]:
                self._reassign_to(tp, member)
                return
        raise AssertionError(f"sticky assignor: no member can take {tp!r}")

    # -- steps ------------------------------------------------------------------------

    def _assign_owned(self) -> set[TopicPartition]:
        kept: set[TopicPartition] = set()
        for member, partitions in self.current.items():
            subscribed = self.consumer_topics[member]
            still_valid = [tp for tp in partitions if tp[0] in subscribed]
            if len(still_valid) != len(partitions):
                self.revocation_required = True
                partitions[:] = still_valid
            kept.update(still_valid)
        return kept

    def _perform_reassignments(self, partitions: list[TopicPartition]) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer[tp]
                size = len(self.current[consumer])
                prev = self.prev_assignment.get(tp)
                if (
                    prev is not None
                    and prev.member in self.current
                    and tp[0] in self.consumer_topics[prev.member]
                    and size > len(self.current[prev.member]) + 1
                ):
                    self._reassign_to(tp, prev.member)
                    performed = modified = True
                    continue
                for other in self.topic_consumers[tp[0]]:
                    if other in self.current and size > len(self.current[other]) + 1:
                        self._reassign(tp)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def build(self) -> dict[str, list[TopicPartition]]:
        kept = self._assign_owned()
        unassigned = [tp for tp in self.sorted_all_partitions if tp not in kept]
        for member in self.current:
            self.sorted_members.add(member)

        current = self.current
        initializing = not current[self.sorted_members.last()]

        # Assign every unassigned partition to the least loaded subscriber.
        for tp in unassigned:
            for member in self.sorted_members:
                if tp[0] in self.consumer_topics[member]:
                    self.sorted_members.remove(member)
                    current[member].append(tp)
                    self.partition_consumer[tp] = member
                    self.sorted_members.add(member)
                    break

        # Only partitions of topics with 2+ subscribers, and members that could change, move.
        movable_topics = {t for t, members in self.topic_consumers.items() if len(members) >= 2}
        sorted_all = [tp for tp in self.sorted_all_partitions if tp[0] in movable_topics]
        unassigned = [tp for tp in unassigned if tp[0] in movable_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for member in self.consumer_topics:
            if not self._can_participate(member):
                self.sorted_members.remove(member)
                fixed[member] = current.pop(member)

        pre_balance = {member: list(partitions) for member, partitions in current.items()}
        pre_balance_owner = dict(self.partition_consumer)

        if not self.revocation_required:
            self._perform_reassignments(unassigned)
        performed = self._perform_reassignments(sorted_all)

        if (
            not initializing
            and performed
            and _balance_score(current) >= _balance_score(pre_balance)
        ):
            current.clear()
            current.update(pre_balance)
            self.partition_consumer = pre_balance_owner

        current.update(fixed)
        return current


# --------------------------------------------------------------------------- entry points


def sticky_plan(
    subscriptions: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
    owned: OwnedPartitions | None = None,
    generations: Generations | None = None,
) -> StickyPlan:
    """Run ``AbstractStickyAssignor.assign`` and report which partitions change owner.

    ``owned`` maps member id -> partitions it owned going into the rebalance (entries for
    non-members are ignored); ``generations`` maps member id -> the generation those were owned
    in (absent: ``DEFAULT_GENERATION``).
    """
    members = list(subscriptions)
    topics_by_member = member_topics(subscriptions)
    topics = normalize_partitions_per_topic(topics_by_member, partitions_per_topic)
    owned_raw = _owned_lists(members, owned)
    gens = _generations(members, generations)
    if not members:
        return StickyPlan(assignment={}, transferring={}, constrained=True)

    java_order = java_hashmap_order(members, java_string_hash)
    ownership = _resolve_ownership(java_order, topics, owned_raw, gens)
    first = topics_by_member[members[0]]
    if all(topics_by_member[m] == first for m in members):
        lists, transferring = _constrained_assign(topics, ownership)
        return StickyPlan(
            assignment=finalize_assignment(members, lists),
            transferring=transferring,
            constrained=True,
        )
    general = _GeneralAssignment(
        topics, topics_by_member, java_order, ownership=ownership, owned_raw=owned_raw, gens=gens
    )
    return StickyPlan(
        assignment=finalize_assignment(members, general.build()),
        transferring=None,
        constrained=False,
    )


def sticky_assign(
    subscriptions: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
    owned: OwnedPartitions | None = None,
    generations: Generations | None = None,
) -> Assignment:
    """Kafka's ``StickyAssignor.assign`` (eager protocol).

    ``owned``/``generations`` are what each member reports having owned, and in which
    generation (Kafka carries them in the subscription user data). Lists are sorted by topic
    then partition.
    """
    return sticky_plan(subscriptions, partitions_per_topic, owned, generations).assignment
