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
  augmenting paths (a chain of hand-overs). Only if reordering cannot balance leaders,
  data moves: a led replica moves to the under-led node if both replica counts stay in
  range, else it is traded for a follower replica of the under-led node
  (:mod:`.planner_leaders`).

Node choice uses lazy heaps keyed on the distance to the target (entries carry a version;
a stale entry is skipped), so a move costs a few heap operations plus a scan of the
donor's partitions until one accepts the receiver: no rescans of all partitions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from kafkacoord.coordinator.controller.planner_goals import (
    Assignment,
    Layout,
    PartitionKey,
    PlanError,
    PlanSummary,
    cluster_layout,
    count_moves,
    movement_lower_bound,
    replica_targets,
    summarize,
)
from kafkacoord.coordinator.controller.planner_leaders import (
    HeapEntry,
    TargetHeaps,
    balance_leaders,
)

__all__ = [
    "PlanError",
    "PlanSummary",
    "count_moves",
    "movement_lower_bound",
    "plan_rebalance",
    "summarize",
]


class _Planner:
    """Replica sets as lists of dense node indices, with per-node counts and heaps."""

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
        # Per node, partitions whose replica on it may move to another rack; kept from the
        # balance phase on, it lets shedding skip other racks' receivers at once when 0
        # (e.g. RF == #racks: every partition already spans every rack).
        self.opens: list[int] | None = None
        self.heaps = TargetHeaps(self.count, self.lo, self.hi, self.nodes)

    # -- helpers ---------------------------------------------------------------------------

    def _spans(self, replicas: Iterable[int]) -> int:
        return len({self.rack[n] for n in replicas})

    def accepts(self, replicas: list[int], out: int, into: int) -> bool:
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

    def move(self, p: int, out: int, into: int) -> None:
        replicas = self.parts[p]
        opens = self.opens
        if opens is not None:
            for n in replicas:
                opens[n] -= self._opens_to_other_racks(replicas, n)
        replicas[replicas.index(out)] = into
        if opens is not None:
            for n in replicas:
                opens[n] += self._opens_to_other_racks(replicas, n)
        self._drop(p, out)
        self._add(p, into)

    def _opens_to_other_racks(self, replicas: list[int], n: int) -> int:
        """1 if ``n``'s replica could move to some other rack without breaking spread."""
        racks = [self.rack[m] for m in replicas]
        spanned = len(set(racks))
        crowded = racks.count(self.rack[n]) > 1
        spare = spanned > self.layout.spread(len(replicas))
        return int(crowded or spare or spanned < self.layout.rack_count)

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
        popped: list[HeapEntry] = []
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
        self.opens = [0] * len(self.ids)
        for replicas in self.parts:
            for n in replicas:
                self.opens[n] += self._opens_to_other_racks(replicas, n)
        heaps = self.heaps
        moved = True
        while moved:
            moved = heaps.settle(heaps.donors, self._shed) or heaps.settle(
                heaps.receivers, self._fill
            )
            moved = moved or self._relay_any()

    def _relay_any(self) -> bool:
        """When no direct move helps: one relay from a node outside its range, if any."""
        count, lo, hi = self.count, self.lo, self.hi
        by_room = sorted(self.nodes, key=lambda n: (count[n] - lo[n], count[n] - hi[n], n))
        by_load = by_room[::-1]
        for donor in (n for n in by_load if count[n] > hi[n]):
            if any(self._relay(donor, n) for n in by_room if count[n] < hi[n]):
                return True
        for into in (n for n in by_room if count[n] < lo[n]):
            if any(self._relay(n, into) for n in by_load if count[n] > lo[n]):
                return True
        return False

    def _relay(self, donor: int, into: int) -> bool:
        """Two moves through a node ``via`` whose count stays: donor -> via -> into.

        Needed when rack spread blocks every direct move, e.g. RF 3 on two racks: a
        partition has two replicas in one rack, and only a partition with two replicas in
        the donor's rack can give one to the other rack, but its other replica there may be
        the very node with room.
        """
        parts = self.parts
        for via in self.nodes:
            if via in (donor, into):
                continue
            q = next(
                (
                    q
                    for q in self.hosted[via]
                    if into not in parts[q] and self.accepts(parts[q], via, into)
                ),
                None,
            )
            if q is None:
                continue
            p = next(
                (
                    p
                    for p in self.hosted[donor]
                    if p != q and via not in parts[p] and self.accepts(parts[p], donor, via)
                ),
                None,
            )
            if p is not None:
                self.move(q, via, into)
                self.move(p, donor, via)
                return True
        return False

    def _shed(self, donor: int) -> bool:
        """Move one replica off ``donor`` to the least loaded node with room that fits."""
        heaps, heap = self.heaps, self.heaps.receivers
        popped: list[HeapEntry] = []
        # Rack -> donor's partitions that rack spread lets a node of that rack join: a
        # full scan is done at most once per rack, then only membership is checked.
        scanned: dict[int, list[int]] = {}
        done = False
        while not done and (entry := heaps.pop(heap)) is not None:
            popped.append(entry)
            into = entry[2]
            if self.count[into] >= self.hi[into]:
                break  # receivers with room come first: none is left
            if into == donor:
                continue
            rack = self.rack[into]
            if rack != self.rack[donor] and not self.opens_for(donor):
                continue
            if rack in scanned:
                p = next((p for p in scanned[rack] if into not in self.parts[p]), -1)
            else:
                p, accepting = self._scan(donor, into)
                if p < 0:
                    scanned[rack] = accepting
            if p >= 0:
                self.move(p, donor, into)
                done = True
        heaps.restore(heap, popped)
        return done

    def opens_for(self, donor: int) -> bool:
        return self.opens is None or self.opens[donor] > 0

    def _scan(self, donor: int, into: int) -> tuple[int, list[int]]:
        """A partition of ``donor`` that ``into`` can join, else (-1, the partitions whose
        rack spread accepts ``into``'s rack but that already hold ``into``)."""
        accepting: list[int] = []
        for p in self.hosted[donor]:
            replicas = self.parts[p]
            if self.accepts(replicas, donor, into):
                if into not in replicas:
                    return p, accepting
                accepting.append(p)
        return -1, accepting

    def _fill(self, into: int) -> bool:
        """Move one replica onto ``into`` from the most loaded node above its floor."""
        heaps, heap = self.heaps, self.heaps.donors
        popped: list[HeapEntry] = []
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
                if into not in replicas and self.accepts(replicas, donor, into):
                    self.move(p, donor, into)
                    done = True
                    break
        heaps.restore(heap, popped)
        return done

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


_LEADER_ROUNDS = 8


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
    # To a fixed point, so that planning the plan again changes nothing.
    result = planner.result()
    for _ in range(_LEADER_ROUNDS):
        balance_leaders(planner)
        again = planner.result()
        if again == result:
            break
        result = again
    return result
