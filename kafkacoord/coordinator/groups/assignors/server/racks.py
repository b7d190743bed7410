"""Rack matching for the uniform assignor: which unassigned partition goes to which member.

A partition *matches* a member when one of the partition's replicas sits in the member's rack;
a consumer then reads from a replica in its own rack (KIP-881) rather than across racks.

:func:`rack_aware_fill` hands out the partitions a homogeneous group must place (never assigned
before, or given up by members over their quota) to the members with room, matching as many as
possible. Members in the same rack are interchangeable for matching, so the problem shrinks to
racks and *rack sets* (partitions grouped by the member racks that hold one of their replicas):
a maximum flow from rack sets to racks, bounded by each rack's room, gives the most matches.
The members that may take one partition over the minimum quota (when the count does not divide
evenly) are a choice too: the flow picks their racks, through a node that caps the number of
such extra partitions. Partitions that cannot match go to the room left, in member id order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

__all__ = ["max_flow", "rack_aware_fill"]

TP = tuple[int, int]


def max_flow(
    nodes: int, edges: Sequence[tuple[int, int, int]], source: int, sink: int
) -> list[int]:
    """Edmonds-Karp on a small graph; the flow on each of ``edges`` (``(from, to, capacity)``).

    The graphs here have a node per rack and per rack set, so a plain BFS augmentation is
    plenty; each augmentation pushes a path's whole bottleneck, not one unit.
    """
    head: list[list[int]] = [[] for _ in range(nodes)]
    to: list[int] = []
    cap: list[int] = []
    for u, v, c in edges:
        head[u].append(len(to))
        to.append(v)
        cap.append(c)
        head[v].append(len(to))
        to.append(u)
        cap.append(0)
    while True:
        via = [-1] * nodes
        via[source] = -2
        queue = deque([source])
        while queue and via[sink] == -1:
            u = queue.popleft()
            for e in head[u]:
                v = to[e]
                if cap[e] > 0 and via[v] == -1:
                    via[v] = e
                    queue.append(v)
        if via[sink] == -1:
            break
        bottleneck = -1
        v = sink
        while v != source:
            e = via[v]
            bottleneck = cap[e] if bottleneck < 0 else min(bottleneck, cap[e])
            v = to[e ^ 1]
        v = sink
        while v != source:
            e = via[v]
            cap[e] -= bottleneck
            cap[e ^ 1] += bottleneck
            v = to[e ^ 1]
    # An edge's flow is what its reverse edge has gained.
    return [cap[2 * i + 1] for i in range(len(edges))]


def rack_aware_fill(
    unassigned: Sequence[TP],
    need: Sequence[int],
    *,
    extra_order: Sequence[int],
    free_extras: int,
    member_racks: Sequence[str | None],
    replicas: Sequence[dict[int, frozenset[str]]],
) -> list[list[TP]]:
    """Per member, the partitions of ``unassigned`` it receives.

    ``need[m]`` partitions go to member ``m`` for sure; ``free_extras`` more go one each to
    members of ``extra_order`` (preference order, used where matching does not decide).
    ``sum(need) + free_extras`` must equal ``len(unassigned)``.
    """
    room = list(need)
    extra_ok = set(extra_order)
    rack_members: dict[str, list[int]] = {}
    for m, rack in enumerate(member_racks):
        if rack is not None and (room[m] > 0 or m in extra_ok):
            rack_members.setdefault(rack, []).append(m)
    rack_names = sorted(rack_members)

    sets: dict[frozenset[str], list[TP]] = {}
    unmatched: list[TP] = []
    for tp in unassigned:
        matching = replicas[tp[0]].get(tp[1])
        key = matching.intersection(rack_members) if matching else None
        if key:
            sets.setdefault(frozenset(key), []).append(tp)
        else:
            unmatched.append(tp)
    set_keys = sorted(sets, key=sorted)

    # Nodes: 0 source, 1 sink, 2 extras, then rack sets, then racks.
    rack_node = {r: 3 + len(set_keys) + i for i, r in enumerate(rack_names)}
    edges: list[tuple[int, int, int]] = []
    set_edges: list[tuple[int, frozenset[str], str]] = []  # (edge, rack set, rack)
    for i, key in enumerate(set_keys):
        size = len(sets[key])
        edges.append((0, 3 + i, size))
        for r in sorted(key):
            set_edges.append((len(edges), key, r))
            edges.append((3 + i, rack_node[r], size))
    extra_edges: dict[str, int] = {}
    for r in rack_names:
        members = rack_members[r]
        edges.append((rack_node[r], 1, sum(room[m] for m in members)))
        extra_edges[r] = len(edges)
        edges.append((rack_node[r], 2, sum(1 for m in members if m in extra_ok)))
    edges.append((2, 1, free_extras))
    flow = max_flow(3 + len(set_keys) + len(rack_names), edges, 0, 1)

    # The extra partitions the flow put in each rack go to that rack's first eligible members.
    granted: set[int] = set()
    for r in rack_names:
        wanted = flow[extra_edges[r]]
        for m in extra_order:
            if wanted == 0:
                break
            if member_racks[m] == r:
                room[m] += 1
                granted.add(m)
                wanted -= 1
    left = free_extras - len(granted)
    for m in extra_order:
        if left == 0:
            break
        if m not in granted:
            room[m] += 1
            left -= 1

    given: list[list[TP]] = [[] for _ in need]
    taken = dict.fromkeys(set_keys, 0)
    per_rack: dict[str, list[TP]] = {r: [] for r in rack_names}
    for e, key, r in set_edges:
        amount = flow[e]
        if amount:
            start = taken[key]
            per_rack[r].extend(sets[key][start : start + amount])
            taken[key] = start + amount
    for r in rack_names:
        pool = per_rack[r]
        i = 0
        for m in rack_members[r]:
            if i == len(pool):
                break
            n = min(room[m], len(pool) - i)
            given[m].extend(pool[i : i + n])
            room[m] -= n
            i += n
    for key in set_keys:
        unmatched.extend(sets[key][taken[key] :])
    unmatched.sort()
    i = 0
    for m, space in enumerate(room):
        if space > 0:
            given[m].extend(unmatched[i : i + space])
            i += space
    return given
