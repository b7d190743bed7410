"""Goals and measures of the rebalance planner (:mod:`.planner`).

This module says *what* a good plan is; :mod:`.planner` finds one.

- :func:`cluster_layout`: the nodes that may hold replicas (``racks`` minus ``remove``),
  their racks and capacities.
- :func:`replica_targets`: the per-node replica range ``[lo, hi]`` of goal 3.
- :func:`movement_lower_bound`: a lower bound on the moves of any plan meeting goals 1-3.
- :func:`summarize`: per-node counts before and after a plan, for a CLI to print.

Racks. A node whose rack is ``None`` is put in a rack of its own named ``None``, shared
by every rack-less node. So when no node has a rack there is a single rack and rack spread
is vacuous (``min(RF, 1)`` distinct racks), and in a mixed cluster the rack-less nodes
count as one more rack: Kafka refuses to place replicas on such clusters at all, but a
planner that must drain a node cannot refuse, and one shared rack is the cautious reading
(it never claims two rack-less nodes are in different failure domains).

Goal 3, "within one of even". With capacities ``cap`` (unlimited when not given), the
even level is the water-filling level ``L``: the largest ``L`` with ``sum(min(cap, L)) <=
total``; each node then holds ``min(cap, L)`` or ``min(cap, L + 1)`` replicas. Rack spread
can make that impossible: with ``RF >= #racks`` every rack holds a replica of every
partition, so a rack of one node holds one replica per partition however many nodes the
other racks have. Rack spread bounds each rack's total to ``[A_r, B_r]`` (summed over
partitions: ``RF >= #racks`` gives ``1 <= n_r <= min(size_r, RF - #racks + 1)``, else
``0 <= n_r <= 1``). So the level is found on rack totals clamped to those bounds: ``L`` is
the largest level whose clamped totals fit; a clamped rack's nodes share its bound within
one, the others hold ``min(cap, L)`` or ``min(cap, L + 1)``. With one replication factor
the bounds are exact; with mixed factors they are necessary but not always sufficient,
and the planner then gets as close as its moves allow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "Assignment",
    "Layout",
    "PartitionKey",
    "PlanError",
    "PlanSummary",
    "cluster_layout",
    "count_moves",
    "even_range",
    "movement_lower_bound",
    "replica_targets",
    "summarize",
]

PartitionKey: TypeAlias = tuple[str, int]
"""``(topic, partition)``."""

Assignment: TypeAlias = Mapping[PartitionKey, Sequence[int]]
"""Replica lists per partition, the preferred leader first."""

UNLIMITED = 1 << 62
"""The capacity of a node without ``max_replicas``."""


class PlanError(ValueError):
    """No plan can meet the hard goals (rack spread, capacity, draining) for this input."""


@dataclass(frozen=True)
class Layout:
    """The nodes that may hold replicas, ascending, with rack index and capacity."""

    eligible: tuple[int, ...]
    rack_of: Mapping[int, int]
    """Eligible node -> rack index (racks numbered in label order, ``None`` last)."""
    rack_count: int
    capacity: Mapping[int, int]

    def spread(self, replication_factor: int) -> int:
        """Distinct racks a partition of this replication factor must span."""
        return min(replication_factor, self.rack_count)


def cluster_layout(
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    max_replicas: Mapping[int, int] | None = None,
) -> Layout:
    """Eligible nodes: every node in ``racks`` that is not being removed."""
    removed = frozenset(remove)
    eligible = tuple(sorted(node for node in racks if node not in removed))
    labels = sorted({racks[node] for node in eligible}, key=lambda r: (r is None, r or ""))
    index = {label: i for i, label in enumerate(labels)}
    capacity: dict[int, int] = {}
    for node in eligible:
        cap = UNLIMITED if max_replicas is None else max_replicas.get(node, UNLIMITED)
        if cap < 0:
            raise PlanError(f"max_replicas of node {node} is negative: {cap}")
        capacity[node] = cap
    return Layout(eligible, {n: index[racks[n]] for n in eligible}, len(labels), capacity)


def even_range(total: int, caps: Sequence[int]) -> list[tuple[int, int]]:
    """Water-filling: per node ``(lo, hi)`` so that ``total`` spreads within one of even.

    Nodes whose capacity is at or below the level are full (``lo == hi == cap``); the
    others hold ``L`` or ``L + 1`` (``hi == L`` when ``total`` fills them exactly).
    """
    if total > sum(caps):
        raise PlanError(f"{total} replicas do not fit: the nodes' capacity is {sum(caps)} in total")
    low, high = 0, total
    while low < high:  # the largest level L with sum(min(cap, L)) <= total
        mid = (low + high + 1) // 2
        if sum(min(cap, mid) for cap in caps) <= total:
            low = mid
        else:
            high = mid - 1
    level = low
    spare = 1 if total > sum(min(cap, level) for cap in caps) else 0
    return [(cap, cap) if cap <= level else (level, level + spare) for cap in caps]


def replica_targets(
    layout: Layout, replication_factors: Iterable[int]
) -> dict[int, tuple[int, int]]:
    """Goal 3: ``(lo, hi)`` replicas for every eligible node (see the module docstring)."""
    factors = Counter(rf for rf in replication_factors if rf > 0)
    total = sum(rf * n for rf, n in factors.items())
    nodes = layout.eligible
    if total and not nodes:
        raise PlanError("no eligible nodes: every node is removed, dead or unknown")
    racks = layout.rack_count
    members: list[list[int]] = [[] for _ in range(racks)]
    for node in nodes:
        members[layout.rack_of[node]].append(node)
    lower, upper = [0] * racks, [0] * racks
    for rf, count in sorted(factors.items()):
        if rf > len(nodes):
            raise PlanError(f"replication factor {rf} exceeds the {len(nodes)} eligible nodes")
        for r in range(racks):
            if rf >= racks:
                lower[r] += count
                upper[r] += count * min(len(members[r]), rf - racks + 1)
            else:
                upper[r] += count
    capacity = sum(layout.capacity[n] for n in nodes)
    if total > capacity:
        raise PlanError(f"{total} replicas do not fit: the nodes' capacity is {capacity}")
    rack_caps = [[layout.capacity[n] for n in rack] for rack in members]
    for r, caps in enumerate(rack_caps):
        if lower[r] > sum(caps):
            raise PlanError(f"rack spread needs {lower[r]} replicas on a rack of {sum(caps)}")
        upper[r] = min(upper[r], sum(caps))

    def rack_totals(level: int) -> list[int]:
        """Each rack's total with its nodes at ``level``, clamped to its bounds."""
        return [
            min(max(sum(min(cap, level) for cap in caps), lower[r]), upper[r])
            for r, caps in enumerate(rack_caps)
        ]

    if sum(rack_totals(total)) < total:
        raise PlanError(f"{total} replicas do not fit: capacity and rack spread leave less room")
    low, high = 0, total
    while low < high:  # the largest level L whose clamped rack totals fit in total
        mid = (low + high + 1) // 2
        if sum(rack_totals(mid)) <= total:
            low = mid
        else:
            high = mid - 1
    level = low
    at_level, above = rack_totals(level), rack_totals(level + 1)
    spare = total - sum(at_level)
    targets: dict[int, tuple[int, int]] = {}
    for r, caps in enumerate(rack_caps):
        if spare and above[r] > at_level[r]:
            # A rack that grows with the level takes part of the spare: L or L + 1.
            ranges = [(min(cap, level), min(cap, level + 1)) for cap in caps]
        else:
            ranges = even_range(at_level[r], caps)
        targets.update(zip(members[r], ranges, strict=True))
    return targets


def _hard_moves(replicas: Sequence[int], layout: Layout) -> int:
    """Moves goal 1 and draining force on one partition, whatever else happens.

    A plan keeps at most the distinct eligible replicas (``good``) and spans at most their
    racks plus one per added replica.
    """
    good = {n for n in replicas if n in layout.rack_of}
    spanned = {layout.rack_of[n] for n in good}
    rf = len(replicas)
    return max(rf - len(good), layout.spread(rf) - len(spanned), 0)


def replica_counts(assignment: Assignment) -> Counter[int]:
    """Partitions per node (a node listed twice in one partition counts once)."""
    return Counter(n for replicas in assignment.values() for n in set(replicas))


def leader_counts(assignment: Assignment) -> Counter[int]:
    """Partitions per preferred leader (first replica)."""
    return Counter(replicas[0] for replicas in assignment.values() if replicas)


def movement_lower_bound(
    assignment: Assignment,
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    *,
    max_replicas: Mapping[int, int] | None = None,
) -> int:
    """A lower bound on the moves (see :func:`count_moves`) of any plan meeting goals 1-3.

    The largest of three bounds, each true on its own:

    - excess: ``sum(max(0, count - hi))`` over all nodes, where removed, dead and unknown
      nodes have ``hi == 0``. A move takes a replica off one node, so every replica above
      a node's ceiling needs a move of its own;
    - deficit: ``sum(max(0, lo - count))`` over eligible nodes; a move adds one replica;
    - hard: per partition, the replicas on ineligible nodes or listed twice, or the racks
      it lacks for rack spread, whichever is more (each added replica adds one rack).

    Moves that only fix rack spread are not in the excess or deficit, and the hard bound
    does not see balance, so a plan that needs both can need more than this bound.
    """
    layout = cluster_layout(racks, remove, max_replicas)
    targets = replica_targets(layout, (len(r) for r in assignment.values()))
    counts = replica_counts(assignment)
    excess = sum(max(0, c - targets.get(n, (0, 0))[1]) for n, c in counts.items())
    deficit = sum(max(0, lo - counts.get(n, 0)) for n, (lo, _) in targets.items())
    hard = sum(_hard_moves(replicas, layout) for replicas in assignment.values())
    return max(excess, deficit, hard)


def count_moves(before: Assignment, after: Assignment) -> int:
    """Replicas added to partitions' replica sets: ``sum(|TRS - ORS|)``."""
    return sum(len(set(replicas) - set(before.get(key, ()))) for key, replicas in after.items())


@dataclass(frozen=True)
class PlanSummary:
    """Per-node replica and preferred-leader counts before and after a plan.

    Every node of ``before``, ``after`` and ``racks`` appears in each mapping (ascending,
    zero when it holds nothing).
    """

    replicas_before: dict[int, int]
    replicas_after: dict[int, int]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    moves: int
    lower_bound: int
    leader_changes: int
    """Partitions whose preferred leader (first replica) differs."""


def summarize(
    before: Assignment,
    after: Assignment,
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    *,
    max_replicas: Mapping[int, int] | None = None,
) -> PlanSummary:
    """Counts, moves and the movement lower bound of the plan ``before -> after``."""
    counts = [replica_counts(before), replica_counts(after)]
    leaders = [leader_counts(before), leader_counts(after)]
    nodes = sorted(set(racks).union(*counts))

    def table(counter: Counter[int]) -> dict[int, int]:
        return {n: counter.get(n, 0) for n in nodes}

    changed = sum(
        1
        for key, replicas in after.items()
        if replicas and (not before.get(key) or before[key][0] != replicas[0])
    )
    return PlanSummary(
        replicas_before=table(counts[0]),
        replicas_after=table(counts[1]),
        leaders_before=table(leaders[0]),
        leaders_after=table(leaders[1]),
        moves=count_moves(before, after),
        lower_bound=movement_lower_bound(before, racks, remove, max_replicas=max_replicas),
        leader_changes=changed,
    )
