"""Inputs and outputs of the server-side assignors, and the normalised group they all start from.

Conventions (all server-side assignors):

- ``members`` maps member id -> ``{"topics": [...], "assigned": {topic: [partitions]}}`` with an
  optional ``"rack"``. ``"assigned"`` is the member's current target assignment (missing or
  empty: nothing).
- ``topics`` maps topic -> partition count. A subscribed topic that is missing (or has no
  partitions) does not exist yet and is ignored, as are assigned partitions that no longer
  exist (topic gone, number at or past the count) or whose topic the member no longer
  subscribes to. A partition claimed by several members stays with the first of them in member
  id order.
- ``racks`` (optional) maps topic -> partition -> the racks of that partition's replicas.
- The result has an entry, possibly ``{}``, for every member; each maps topic -> sorted
  partitions, only for topics with at least one partition. The result depends only on the
  inputs' contents, never on their iteration order: members are taken in member id order and
  topics in name order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

__all__ = [
    "GroupAssignment",
    "MemberAssignment",
    "MemberSpec",
    "Members",
    "NormalizedGroup",
    "PartitionRacks",
    "ServerAssignor",
    "TopicCounts",
    "finalize",
    "normalize_group",
    "replica_racks",
]

MemberSpec: TypeAlias = Mapping[str, Any]
Members: TypeAlias = Mapping[str, MemberSpec]
TopicCounts: TypeAlias = Mapping[str, int]
PartitionRacks: TypeAlias = Mapping[str, Mapping[int, Sequence[str]]]
MemberAssignment: TypeAlias = dict[str, list[int]]
GroupAssignment: TypeAlias = dict[str, MemberAssignment]

# Per member (by index): topic index -> partitions. The assignors work on indices so that the
# hot loops compare small ints rather than strings.
Holdings: TypeAlias = list[dict[int, list[int]]]


class ServerAssignor(Protocol):
    """The calling convention of every server-side assignor."""

    def __call__(
        self, members: Members, topics: TopicCounts, racks: PartitionRacks | None = None
    ) -> GroupAssignment: ...


@dataclass(slots=True)
class NormalizedGroup:
    """A group with members and topics numbered in sorted order.

    ``topic_names`` holds only the topics that some member subscribes to and that exist with at
    least one partition. ``owned`` is each member's valid current assignment, partitions sorted
    and claimed by one member only; ``claimed[t][p]`` is 1 when some member owns ``(t, p)``.
    """

    member_ids: list[str]
    topic_names: list[str]
    counts: list[int]
    subscriptions: list[tuple[int, ...]]
    owned: Holdings
    claimed: list[bytearray]
    member_racks: list[str | None]

    def is_homogeneous(self) -> bool:
        """Every member subscribes to the same existing topics (Kafka's ``HOMOGENEOUS``)."""
        first = self.subscriptions[0]
        return all(subs == first for subs in self.subscriptions)

    def subscribers(self) -> list[list[int]]:
        """Per topic, the subscribed members in member id order."""
        out: list[list[int]] = [[] for _ in self.topic_names]
        for m, subs in enumerate(self.subscriptions):
            for t in subs:
                out[t].append(m)
        return out


def normalize_group(members: Members, topics: TopicCounts) -> NormalizedGroup:
    """Number members and topics, and keep only what still exists and is subscribed."""
    member_ids = sorted(members)
    specs = [members[m] for m in member_ids]
    raw_subs: list[Iterable[str]] = [spec.get("topics") or () for spec in specs]
    for member, subs in zip(member_ids, raw_subs, strict=True):
        if isinstance(subs, str):
            raise TypeError(f"member {member!r}: topics must be a collection of names, not a str")

    wanted: set[str] = set()
    for subs in raw_subs:
        wanted.update(subs)
    topic_names = sorted(t for t in wanted if topics.get(t, 0) > 0)
    index = {t: i for i, t in enumerate(topic_names)}
    counts = [topics[t] for t in topic_names]

    # Members often share one subscription list; translate each distinct one once.
    cache: dict[tuple[str, ...], tuple[tuple[int, ...], frozenset[int]]] = {}
    subscriptions: list[tuple[int, ...]] = []
    subscribed: list[frozenset[int]] = []
    for subs in raw_subs:
        key = tuple(subs)
        entry = cache.get(key)
        if entry is None:
            effective = {index[t] for t in key if t in index}
            entry = cache[key] = (tuple(sorted(effective)), frozenset(effective))
        subscriptions.append(entry[0])
        subscribed.append(entry[1])

    claimed = [bytearray(c) for c in counts]
    owned: Holdings = []
    for spec, topic_set in zip(specs, subscribed, strict=True):
        mine: dict[int, list[int]] = {}
        assigned: Mapping[str, Iterable[int]] = spec.get("assigned") or {}
        for name, partitions in assigned.items():
            t = index.get(name)
            if t is None or t not in topic_set:
                continue
            count, taken = counts[t], claimed[t]
            keep: list[int] = []
            for p in sorted(set(partitions)):
                if 0 <= p < count and not taken[p]:
                    taken[p] = 1
                    keep.append(p)
            if keep:
                mine[t] = keep
        # Topic order, not the input's order, so that later walks over a member's topics
        # depend on the contents only.
        owned.append(dict(sorted(mine.items())))

    member_racks = [spec.get("rack") for spec in specs]
    return NormalizedGroup(
        member_ids, topic_names, counts, subscriptions, owned, claimed, member_racks
    )


def replica_racks(
    group: NormalizedGroup, racks: PartitionRacks | None
) -> list[dict[int, frozenset[str]]] | None:
    """Per topic index, partition -> racks of its replicas that some member sits in.

    ``None`` when rack matching cannot apply: no rack map, no member with a rack, or no
    subscribed partition with a replica in a member's rack.
    """
    if not racks:
        return None
    member_racks = {r for r in group.member_racks if r is not None}
    if not member_racks:
        return None
    out: list[dict[int, frozenset[str]]] = []
    any_match = False
    for name, count in zip(group.topic_names, group.counts, strict=True):
        by_partition = racks.get(name) or {}
        topic: dict[int, frozenset[str]] = {}
        for p, replicas in by_partition.items():
            if 0 <= p < count:
                matching = member_racks.intersection(replicas)
                if matching:
                    topic[p] = frozenset(matching)
                    any_match = True
        out.append(topic)
    return out if any_match else None


def finalize(group: NormalizedGroup, holdings: Holdings) -> GroupAssignment:
    """The public result: member id -> topic name -> sorted partitions, non-empty topics only."""
    names = group.topic_names
    return {
        member: {names[t]: sorted(parts) for t, parts in sorted(held.items()) if parts}
        for member, held in zip(group.member_ids, holdings, strict=True)
    }
