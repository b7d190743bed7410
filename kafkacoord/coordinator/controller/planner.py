"""Goal-based rebalance planner: Cruise Control's job, built in.

:func:`plan_rebalance` turns a replica assignment into a target assignment that meets, in
priority order (a lower goal never breaks a higher one):

1. rack spread (hard): every partition spans ``min(RF, #racks)`` racks of eligible nodes,
   on distinct nodes;
2. capacity (hard): at most ``max_replicas[node]`` replicas per node;
3. replica distribution: replicas per node within the range of
   :func:`~.planner_goals.replica_targets` (within one of even);
4. leader distribution: preferred leaders (first replicas) within one of even;
5. few moves, close to :func:`~.planner_goals.movement_lower_bound`.

The plan is pure and deterministic: partitions are visited in key order, nodes are dense
indices in id order, heaps break ties on node index and no set or dict order depends on
the hash seed (only sets of ints are iterated, and those in an order fixed by the input).

Algorithm, in phases, each working on incremental per-node counts:

- Repair (goals 1 and draining). Every partition with a replica on a removed, dead or
  unknown node, a node listed twice, or too few racks keeps what it can (dropping extra
  replicas of crowded racks from their most loaded nodes) and fills each freed slot, in
  place so the leader position is kept, with the least loaded node that rack spread allows.
- Balance (goal 3). While a node is above its ceiling it sheds one replica to the least
  loaded node with room whose rack the partition accepts; then, while a node is below its
  floor, it takes one from the most loaded node above the floor. Every move lowers the
  total distance to the targets by one, and shedding prefers nodes below their floor, so
  when nothing blocks the moves their number is ``max(excess, deficit)``: the lower bound.
- Leaders (goal 4). Reordering first: an over-led node hands leadership of a partition to
  another of its replicas, an under-led one takes it, and what is left is solved with
  augmenting paths (a chain of hand-overs). Only if reordering cannot balance leaders, a
  pair of moves swaps a led replica of the over-led node with a follower replica of the
  under-led one, which keeps both nodes' replica counts.

Node choice uses lazy heaps keyed on the distance to the target (entries carry a version;
a stale entry is skipped), so a move costs a few heap operations plus a scan of the
donor's partitions until one accepts the receiver: no rescans of all partitions.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence

from kafkacoord.coordinator.controller.planner_goals import (
    Assignment,
    Layout,
    PartitionKey,
    PlanError,
    PlanSummary,
    cluster_layout,
    count_moves,
    even_range,
    movement_lower_bound,
    replica_targets,
    summarize,
)

__all__ = [
    "PlanError",
    "PlanSummary",
    "count_moves",
    "movement_lower_bound",
    "plan_rebalance",
    "summarize",
]

_Entry = tuple[int, int, int, int]  # (key, tie-break key, node, version)


class _Heaps:
    """Nodes ordered as donors (furthest above target first) and receivers (below first).

    ``lo``/``hi`` are the targets; ``count`` is shared with the caller, who calls
    :meth:`touch` after changing it. Keys are distances to the targets; since ``hi <= lo +
    1``, every node with ``count < hi`` comes before every node without room, and every
    node with ``count > lo`` before every node without surplus.
    """

    def __init__(self, count: list[int], lo: list[int], hi: list[int], nodes: Iterable[int]):
        self.count, self.lo, self.hi = count, lo, hi
        self.version = [0] * len(count)
        self.donors: list[_Entry] = []
        self.receivers: list[_Entry] = []
        for node in nodes:
            self._push(node)

    def _push(self, n: int) -> None:
        c, v = self.count[n], self.version[n]
        heapq.heappush(self.donors, (self.hi[n] - c, self.lo[n] - c, n, v))
        heapq.heappush(self.receivers, (c - self.lo[n], c - self.hi[n], n, v))

    def touch(self, n: int) -> None:
        self.version[n] += 1
        self._push(n)

    def pop(self, heap: list[_Entry]) -> _Entry | None:
        while heap:
            entry = heapq.heappop(heap)
            if entry[3] == self.version[entry[2]]:
                return entry
        return None

    def peek(self, heap: list[_Entry]) -> _Entry | None:
        while heap and heap[0][3] != self.version[heap[0][2]]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def restore(self, heap: list[_Entry], entries: Iterable[_Entry]) -> None:
        for entry in entries:
            heapq.heappush(heap, entry)


class _Planner:
    def __init__(self, assignment: Assignment, layout: Layout) -> None:
        self.keys: list[PartitionKey] = sorted(assignment)
        ids = sorted(set(layout.eligible).union(*(set(r) for r in assignment.values())))
        index = {node: i for i, node in enumerate(ids)}
        self.ids = ids
        size = len(ids)
        targets = replica_targets(layout, (len(r) for r in assignment.values()))
        self.eligible = [False] * size
        self.rack = [-1] * size
        self.cap = [0] * size
        self.lo = [0] * size
        self.hi = [0] * size
        for node in layout.eligible:
            i = index[node]
            self.eligible[i] = True
            self.rack[i] = layout.rack_of[node]
            self.cap[i] = layout.capacity[node]
            self.lo[i], self.hi[i] = targets[node]
        self.layout = layout
        self.parts = [[index[n] for n in assignment[key]] for key in self.keys]
        self.count = [0] * size
        self.hosted: list[set[int]] = [set() for _ in range(size)]
        for p, replicas in enumerate(self.parts):
            for n in replicas:
                if p not in self.hosted[n]:
                    self.hosted[n].add(p)
                    self.count[n] += 1
        self.nodes = [i for i in range(size) if self.eligible[i]]
        self.heaps = _Heaps(self.count, self.lo, self.hi, self.nodes)

    # -- helpers ---------------------------------------------------------------------------

    def _spans(self, replicas: Iterable[int]) -> int:
        return len({self.rack[n] for n in replicas})

    def _accepts(self, replicas: list[int], out: int, into: int) -> bool:
        """Rack spread still holds after replacing ``out`` by ``into``."""
        if self.rack[into] == self.rack[out]:
            return True
        racks = {self.rack[n] for n in replicas if n != out}
        racks.add(self.rack[into])
        return len(racks) >= self.layout.spread(len(replicas))

    def _add(self, p: int, n: int) -> None:
        self.hosted[n].add(p)
        self.count[n] += 1
        if self.eligible[n]:
            self.heaps.touch(n)

    def _drop(self, p: int, n: int) -> None:
        self.hosted[n].discard(p)
        self.count[n] -= 1
        if self.eligible[n]:
            self.heaps.touch(n)

    def _move(self, p: int, out: int, into: int) -> None:
        replicas = self.parts[p]
        replicas[replicas.index(out)] = into
        self._drop(p, out)
        self._add(p, into)

    # -- phase 1: repair -------------------------------------------------------------------

    def repair(self) -> None:
        for p, replicas in enumerate(self.parts):
            if not replicas:
                continue
            seen: set[int] = set()
            slots: list[int] = []
            for i, n in enumerate(replicas):
                if self.eligible[n] and n not in seen:
                    seen.add(n)
                else:
                    slots.append(i)
            spread = self.layout.spread(len(replicas))
            if not slots and self._spans(replicas) >= spread:
                continue
            for i in slots:
                n = replicas[i]
                if n not in seen and p in self.hosted[n]:
                    self._drop(p, n)
                replicas[i] = -1
            self._drop_crowded(p, slots, spread)
            slots.sort()
            for k, i in enumerate(slots):
                members = [n for n in replicas if n >= 0]
                present = {self.rack[n] for n in members}
                # The last slots must open new racks if rack spread still lacks them.
                must_open = len(present) + len(slots) - k - 1 < spread
                into = self._receiver(members, present if must_open else set())
                if into is None:
                    key = self.keys[p]
                    raise PlanError(f"no node can take a replica of {key[0]}-{key[1]}")
                replicas[i] = into
                self._add(p, into)

    def _drop_crowded(self, p: int, slots: list[int], spread: int) -> None:
        """Free slots on crowded racks until the free slots can complete rack spread."""
        replicas = self.parts[p]
        while True:
            kept = [(i, n) for i, n in enumerate(replicas) if n >= 0]
            per_rack: dict[int, int] = {}
            for _, n in kept:
                per_rack[self.rack[n]] = per_rack.get(self.rack[n], 0) + 1
            if len(per_rack) + len(slots) >= spread:
                return
            # Most loaded node above its target first; keep the leader on ties.
            i, n = max(
                ((i, n) for i, n in kept if per_rack[self.rack[n]] > 1),
                key=lambda s: (self.count[s[1]] - self.hi[s[1]], s[0] > 0, s[0]),
            )
            replicas[i] = -1
            slots.append(i)
            self._drop(p, n)

    def _receiver(self, members: list[int], closed_racks: set[int]) -> int | None:
        """The least loaded node with capacity left, not a member, not in a closed rack."""
        heaps, heap = self.heaps, self.heaps.receivers
        popped: list[_Entry] = []
        found = None
        while (entry := heaps.pop(heap)) is not None:
            popped.append(entry)
            n = entry[2]
            if n in members or self.rack[n] in closed_racks or self.count[n] >= self.cap[n]:
                continue
            found = n
            break
        heaps.restore(heap, popped)
        return found

    # -- phase 2: balance ------------------------------------------------------------------

    def balance(self) -> None:
        moved = True
        while moved:
            moved = self._shed_all()
            moved = self._fill_all() or moved

    def _shed_all(self) -> bool:
        heaps, heap = self.heaps, self.heaps.donors
        stuck: list[_Entry] = []
        moved = False
        while (entry := heaps.pop(heap)) is not None and entry[0] < 0:
            if self._shed(entry[2]):
                moved = True
            else:
                stuck.append(entry)
        heaps.restore(heap, stuck + ([entry] if entry else []))
        return moved

    def _shed(self, donor: int) -> bool:
        """Move one replica off ``donor`` to the least loaded node with room that fits."""
        heaps, heap = self.heaps, self.heaps.receivers
        popped: list[_Entry] = []
        dead_racks: set[int] = set()
        done = False
        while not done and (entry := heaps.pop(heap)) is not None:
            popped.append(entry)
            into = entry[2]
            if self.count[into] >= self.hi[into]:
                break  # receivers with room come first: none is left
            if into == donor or self.rack[into] in dead_racks:
                continue
            blocked_by_member = False
            for p in self.hosted[donor]:
                replicas = self.parts[p]
                if into in replicas:
                    blocked_by_member = True
                elif self._accepts(replicas, donor, into):
                    self._move(p, donor, into)
                    done = True
                    break
            if not done and not blocked_by_member:
                dead_racks.add(self.rack[into])  # no partition of donor takes this rack
        heaps.restore(heap, popped)
        return done

    def _fill_all(self) -> bool:
        heaps, heap = self.heaps, self.heaps.receivers
        stuck: list[_Entry] = []
        moved = False
        while (entry := heaps.pop(heap)) is not None and entry[0] < 0:
            if self._fill(entry[2]):
                moved = True
            else:
                stuck.append(entry)
        heaps.restore(heap, stuck + ([entry] if entry else []))
        return moved

    def _fill(self, into: int) -> bool:
        """Move one replica onto ``into`` from the most loaded node above its floor."""
        heaps, heap = self.heaps, self.heaps.donors
        popped: list[_Entry] = []
        done = False
        while not done and (entry := heaps.pop(heap)) is not None:
            popped.append(entry)
            donor = entry[2]
            if self.count[donor] <= self.lo[donor]:
                break
            if donor == into:
                continue
            for p in self.hosted[donor]:
                replicas = self.parts[p]
                if into not in replicas and self._accepts(replicas, donor, into):
                    self._move(p, donor, into)
                    done = True
                    break
        heaps.restore(heap, popped)
        return done

    # -- phase 3: leaders ------------------------------------------------------------------

    def leaders(self) -> None:
        led = sum(1 for replicas in self.parts if replicas)
        caps = [self.count[n] for n in self.nodes]
        size = len(self.ids)
        lo, hi = [0] * size, [0] * size
        for n, (low, high) in zip(self.nodes, even_range(led, caps), strict=True):
            lo[n], hi[n] = low, high
        self.lead_count = [0] * size
        self.led: list[set[int]] = [set() for _ in range(size)]
        for p, replicas in enumerate(self.parts):
            if replicas:
                self.led[replicas[0]].add(p)
                self.lead_count[replicas[0]] += 1
        self.lead = _Heaps(self.lead_count, lo, hi, self.nodes)
        moved = True
        while moved:
            moved = self._hand_over_all()
            moved = self._take_over_all() or moved
        while self._augment():
            pass
        while self._swap_leaders():
            pass

    def _make_leader(self, p: int, n: int) -> None:
        replicas = self.parts[p]
        old = replicas[0]
        i = replicas.index(n)
        replicas[0], replicas[i] = n, old  # a swap keeps the other followers' order
        self.led[old].discard(p)
        self.led[n].add(p)
        self.lead_count[old] -= 1
        self.lead_count[n] += 1
        self.lead.touch(old)
        self.lead.touch(n)

    def _hand_over_all(self) -> bool:
        lead, heap = self.lead, self.lead.donors
        stuck: list[_Entry] = []
        moved = False
        while (entry := lead.pop(heap)) is not None and entry[0] < 0:
            if self._hand_over(entry[2]):
                moved = True
            else:
                stuck.append(entry)
        lead.restore(heap, stuck + ([entry] if entry else []))
        return moved

    def _hand_over(self, u: int) -> bool:
        """Give one partition ``u`` leads to its least-led replica with room."""
        lc, lo, hi = self.lead_count, self.lead.lo, self.lead.hi
        best: tuple[int, int, int] | None = None
        for p in self.led[u]:
            for n in self.parts[p][1:]:
                if lc[n] < hi[n]:
                    candidate = (lc[n] - lo[n], n, p)
                    if best is None or candidate < best:
                        best = candidate
            if best is not None and best[0] < 0:
                break  # a replica below its floor: as good as it gets
        if best is None:
            return False
        self._make_leader(best[2], best[1])
        return True

    def _take_over_all(self) -> bool:
        lead, heap = self.lead, self.lead.receivers
        stuck: list[_Entry] = []
        moved = False
        while (entry := lead.pop(heap)) is not None and entry[0] < 0:
            if self._take_over(entry[2]):
                moved = True
            else:
                stuck.append(entry)
        lead.restore(heap, stuck + ([entry] if entry else []))
        return moved

    def _take_over(self, v: int) -> bool:
        """Take leadership of one partition from its most-led leader above the floor."""
        lc, lo = self.lead_count, self.lead.lo
        best: tuple[int, int, int] | None = None
        for p in self.hosted[v]:
            u = self.parts[p][0]
            if u != v and lc[u] > lo[u]:
                candidate = (lo[u] - lc[u], u, p)
                if best is None or candidate < best:
                    best = candidate
        if best is None:
            return False
        self._make_leader(best[2], v)
        return True

    def _augment(self) -> bool:
        """One chain of hand-overs from an over-led node to one with room, if any exists."""
        lc, lo, hi = self.lead_count, self.lead.lo, self.lead.hi
        for start in self.nodes:
            if lc[start] <= hi[start]:
                continue
            # BFS over "u leads p and n is a replica of p": n can take p from u.
            came: dict[int, tuple[int, int]] = {start: (-1, -1)}
            queue = deque([start])
            end = -1
            while queue and end < 0:
                u = queue.popleft()
                for p in sorted(self.led[u]):
                    for n in self.parts[p][1:]:
                        if n not in came:
                            came[n] = (u, p)
                            if lc[n] < hi[n]:
                                end = n
                                break
                            queue.append(n)
                    if end >= 0:
                        break
            if end >= 0:
                while end != start:
                    u, p = came[end]
                    self._make_leader(p, end)
                    end = u
                return True
        return any(lc[n] < lo[n] and self._augment_into(n) for n in self.nodes)

    def _augment_into(self, start: int) -> bool:
        """A chain of hand-overs ending at the under-led ``start`` from a node above floor."""
        lc, lo = self.lead_count, self.lead.lo
        came: dict[int, tuple[int, int]] = {start: (-1, -1)}
        queue = deque([start])
        while queue:
            v = queue.popleft()
            for p in sorted(self.hosted[v] - self.led[v]):
                u = self.parts[p][0]
                if u in came:
                    continue
                came[u] = (v, p)
                if lc[u] > lo[u]:
                    while u != start:
                        v2, p2 = came[u]
                        self._make_leader(p2, v2)
                        u = v2
                    return True
                queue.append(u)
        return False

    def _swap_leaders(self) -> bool:
        """Last resort: two moves that trade a led replica for a follower replica."""
        lc, lo, hi = self.lead_count, self.lead.lo, self.lead.hi
        over = [n for n in self.nodes if lc[n] > hi[n]]
        under = [n for n in self.nodes if lc[n] < lo[n]]
        if not over:
            under_room = under
            over = [n for n in self.nodes if lc[n] > lo[n]] if under else []
        else:
            under_room = [n for n in self.nodes if lc[n] < hi[n]]
        for u in over:
            for v in under_room:
                if self._trade(u, v):
                    return True
        return False

    def _trade(self, u: int, v: int) -> bool:
        for p in sorted(self.led[u]):
            lead_replicas = self.parts[p]
            if v in lead_replicas or not self._accepts(lead_replicas, u, v):
                continue
            for q in sorted(self.hosted[v] - self.led[v]):
                follow = self.parts[q]
                if u in follow or not self._accepts(follow, v, u):
                    continue
                self._move(p, u, v)
                self._move(q, v, u)
                self.led[u].discard(p)
                self.led[v].add(p)
                self.lead_count[u] -= 1
                self.lead_count[v] += 1
                self.lead.touch(u)
                self.lead.touch(v)
                return True
        return False

    # -- result ----------------------------------------------------------------------------

    def result(self) -> dict[PartitionKey, list[int]]:
        for n in self.nodes:
            if self.count[n] > self.cap[n]:
                raise PlanError(
                    f"node {self.ids[n]} holds {self.count[n]} replicas, above its "
                    f"max_replicas {self.cap[n]}, and rack spread lets none move"
                )
        ids = self.ids
        return {key: [ids[n] for n in self.parts[p]] for p, key in enumerate(self.keys)}


def plan_rebalance(
    assignment: Mapping[tuple[str, int], Sequence[int]],
    racks: Mapping[int, str | None],
    remove: Collection[int] = (),
    *,
    max_replicas: Mapping[int, int] | None = None,
) -> dict[tuple[str, int], list[int]]:
    """The target assignment: every partition of ``assignment``, replicas listed leader first.

    ``racks`` names every live node (``None``: no rack; see :mod:`.planner_goals`); nodes
    of ``assignment`` missing from it are dead or unknown and, like the nodes in
    ``remove``, end up with no replicas. ``max_replicas`` caps a node's replica count.
    Raises :class:`PlanError` when no plan can meet the hard goals.
    """
    planner = _Planner(assignment, cluster_layout(racks, remove, max_replicas))
    planner.repair()
    planner.balance()
    planner.leaders()
    return planner.result()
