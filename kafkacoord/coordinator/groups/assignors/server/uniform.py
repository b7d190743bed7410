"""Kafka's server-side ``UniformAssignor`` (``"uniform"``, the default of the consumer protocol).

Goals in priority order, as in Kafka: balance, then stickiness (a member keeps as much of its
current target assignment as balance allows). Like Kafka it picks one of two builders:

**Homogeneous** (every member subscribes to the same existing topics; Kafka's
``UniformHomogeneousAssignmentBuilder``). With ``P`` partitions and ``N`` members, every member
gets ``P // N`` and ``P % N`` of them one more. A member keeps its current partitions up to its
quota (its lowest, in (topic, partition) order) and gives up the rest; the freed and
never-assigned partitions, in (topic, partition) order, fill the members with room in member id
order, in consecutive runs. Unlike Kafka, which hands the extra partitions out in its member
iteration order, kafkacoord gives them first to the members that already hold more than
``P // N`` (most first, then member id): so a member joining moves only the partitions it
receives, and a member leaving moves only its own partitions.

**Heterogeneous** (subscriptions differ; see
:mod:`~kafkacoord.coordinator.groups.assignors.server.heterogeneous`).

**Racks.** When members and partitions have racks, the partitions that have to be placed go,
as far as balance allows, to members whose rack holds one of their replicas: a maximum matching
(:mod:`~kafkacoord.coordinator.groups.assignors.server.racks`) within the counts balance sets
(homogeneous: each member's quota, the flow choosing who takes the extra partitions;
heterogeneous: what each topic's least loaded subscribers take). Kafka 3.7's uniform assignor
matched racks and Kafka 3.8 dropped it (KAFKA-16694); both it and KAFKA-19909, which proposes
bringing it back, rank rack matching above stickiness and revoke partitions whose owner's rack
does not match. kafkacoord ranks it below: a partition a member keeps is never moved only to
match racks, since every move is a revocation the member must finish first, and a group whose
racks change would otherwise churn. A member over its quota gives up its non-matching
partitions first.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.assignors.server.heterogeneous import assign_heterogeneous
from kafkacoord.coordinator.groups.assignors.server.model import (
    GroupAssignment,
    Holdings,
    Members,
    NormalizedGroup,
    PartitionRacks,
    TopicCounts,
    finalize,
    normalize_group,
    replica_racks,
)
from kafkacoord.coordinator.groups.assignors.server.racks import rack_aware_fill

__all__ = ["uniform_assign"]

TP = tuple[int, int]


def uniform_assign(
    members: Members, topics: TopicCounts, racks: PartitionRacks | None = None
) -> GroupAssignment:
    """The group's new target assignment (see the module docstring)."""
    if not members:
        return {}
    group = normalize_group(members, topics)
    replicas = replica_racks(group, racks)
    if group.is_homogeneous():
        holdings = _assign_homogeneous(group, replicas)
    else:
        holdings = assign_heterogeneous(group, replicas)
    return finalize(group, holdings)


def _assign_homogeneous(
    group: NormalizedGroup, replicas: list[dict[int, frozenset[str]]] | None
) -> Holdings:
    n = len(group.member_ids)
    topics = group.subscriptions[0]
    total = sum(group.counts[t] for t in topics)
    holdings: Holdings = group.owned
    if total == 0:
        return holdings
    min_quota, extra = divmod(total, n)
    have = [sum(map(len, held.values())) for held in holdings]

    # Extras go to the members already above the minimum, so that they keep what they have.
    by_size = sorted(range(n), key=lambda m: (-have[m], m))
    fixed = [m for m in by_size[:extra] if have[m] > min_quota]
    quota = [min_quota] * n
    for m in fixed:
        quota[m] = min_quota + 1
    fixed_set = set(fixed)
    extra_order = [m for m in by_size if m not in fixed_set]
    free_extras = extra - len(fixed)

    unassigned: list[TP] = []
    for t in topics:
        taken = group.claimed[t]
        unassigned.extend((t, p) for p in range(group.counts[t]) if not taken[p])
    need = [0] * n
    racks = group.member_racks
    for m in range(n):
        if have[m] <= quota[m]:
            need[m] = quota[m] - have[m]
            continue
        held = [(t, p) for t, parts in holdings[m].items() for p in parts]
        if replicas is not None:
            # Keep matching partitions first (a stable sort keeps (topic, partition) order).
            rack = racks[m]
            held.sort(key=lambda tp: rack not in replicas[tp[0]].get(tp[1], ()))
        unassigned.extend(held[quota[m] :])
        holdings[m] = _by_topic(held[: quota[m]])
    unassigned.sort()

    if replicas is not None:
        given = rack_aware_fill(
            unassigned,
            need,
            extra_order=extra_order,
            free_extras=free_extras,
            member_racks=racks,
            replicas=replicas,
        )
        for m, parts in enumerate(given):
            _add(holdings[m], parts)
        return holdings
    for m in extra_order[:free_extras]:
        need[m] += 1
    i = 0
    for m in range(n):
        if need[m]:
            _add(holdings[m], unassigned[i : i + need[m]])
            i += need[m]
    return holdings


def _by_topic(parts: list[TP]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    _add(out, parts)
    return out


def _add(held: dict[int, list[int]], parts: list[TP]) -> None:
    for t, p in parts:
        bucket = held.get(t)
        if bucket is None:
            held[t] = [p]
        else:
            bucket.append(p)
