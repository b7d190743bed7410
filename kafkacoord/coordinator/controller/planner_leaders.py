"""The rebalance planner's node heaps and its leader phase (goal 4), see :mod:`.planner`.

Leaders are balanced by reordering replicas first, which moves no data:

1. an over-led node hands leadership of one partition to its least-led other replica
   with room, and an under-led node takes leadership from its most-led co-replica;
2. what those direct steps leave is solved with augmenting paths: a chain ``u -> v -> w``
   where ``v`` takes a partition from ``u`` and ``w`` one from ``v``, found by BFS;
3. only if no chain exists (a node's partitions offer no other replica with room, e.g.
   RF 1), data moves: the over-led node's led replica moves to the under-led node when
   both replica counts stay in range, else a pair of moves trades it for a follower
   replica of the under-led node, so that replica counts stay the same. If rack spread
   blocks both, the move may go to another node, kept only if a reordering chain then
   leads on: from it, for an over-led node's surplus; from it into the under-led node,
   when no node is over-led.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from kafkacoord.coordinator.controller.planner_goals import even_range

__all__ = ["HeapEntry", "ReplicaState", "TargetHeaps", "balance_leaders"]

HeapEntry = tuple[int, int, int, int]
"""``(key, tie-break key, node, version)``: a node's place in a :class:`TargetHeaps` heap."""


class TargetHeaps:
    """Nodes ordered as donors (furthest above target first) and receivers (below first).

    ``count`` is shared with the caller, who calls :meth:`touch` after changing it; a
    touch pushes fresh entries and makes the old ones stale (lazy deletion). Keys are
    distances to ``[lo, hi]``; since ``hi <= lo + 1``, every node with ``count < hi``
    comes before every node without room, and every node with ``count > lo`` before every
    node without surplus, so a scan can stop at the first node that does not qualify.
    """

    def __init__(self, count: list[int], lo: list[int], hi: list[int], nodes: Iterable[int]):
        self.count, self.lo, self.hi = count, lo, hi
        self.version = [0] * len(count)
        self.donors: list[HeapEntry] = []
        self.receivers: list[HeapEntry] = []
        for node in nodes:
            self._push(node)

    def _push(self, n: int) -> None:
        c, v = self.count[n], self.version[n]
        heapq.heappush(self.donors, (self.hi[n] - c, self.lo[n] - c, n, v))
        heapq.heappush(self.receivers, (c - self.lo[n], c - self.hi[n], n, v))

    def touch(self, n: int) -> None:
        self.version[n] += 1
        self._push(n)

    def pop(self, heap: list[HeapEntry]) -> HeapEntry | None:
        while heap:
            entry = heapq.heappop(heap)
            if entry[3] == self.version[entry[2]]:
                return entry
        return None

    def restore(self, heap: list[HeapEntry], entries: Iterable[HeapEntry | None]) -> None:
        for entry in entries:
            if entry is not None:
                heapq.heappush(heap, entry)

    def settle(self, heap: list[HeapEntry], step: Callable[[int], bool]) -> bool:
        """Apply ``step`` to the heap's top node while it is outside its range.

        ``step(node)`` makes one move or returns False (the node is stuck and set aside
        for this pass). Returns whether any move was made.
        """
        stuck: list[HeapEntry | None] = []
        moved = False
        while (entry := self.pop(heap)) is not None and entry[0] < 0:
            if step(entry[2]):
                moved = True
            else:
                stuck.append(entry)
        stuck.append(entry)
        self.restore(heap, stuck)
        return moved


class ReplicaState(Protocol):
    """What the leader phase needs from the planner (node indices are dense ints)."""

    parts: list[list[int]]
    hosted: list[set[int]]
    nodes: list[int]
    count: list[int]
    lo: list[int]
    hi: list[int]
    """Replica targets per node (goal 3), which the leader phase must keep."""

    def accepts(self, replicas: list[int], out: int, into: int) -> bool: ...

    def move(self, p: int, out: int, into: int) -> None: ...


def balance_leaders(state: ReplicaState) -> None:
    """Balance preferred leaders of ``state.parts`` in place (see the module docstring)."""
    _Leaders(state).run()


class _Leaders:
    def __init__(self, state: ReplicaState) -> None:
        self.state = state
        self.parts = state.parts
        self.nodes = state.nodes
        size = len(state.count)
        # A node leads at most as many partitions as it holds replicas.
        caps = [state.count[n] for n in self.nodes]
        total = sum(1 for replicas in self.parts if replicas)
        self.lo, self.hi = [0] * size, [0] * size
        for n, (low, high) in zip(self.nodes, even_range(total, caps), strict=True):
            self.lo[n], self.hi[n] = low, high
        self.count = [0] * size
        self.led: list[set[int]] = [set() for _ in range(size)]
        for p, replicas in enumerate(self.parts):
            if replicas:
                self.led[replicas[0]].add(p)
                self.count[replicas[0]] += 1
        self.heaps = TargetHeaps(self.count, self.lo, self.hi, self.nodes)

    def run(self) -> None:
        heaps = self.heaps
        moved = True
        while moved:
            moved = heaps.settle(heaps.donors, self._hand_over)
            moved = heaps.settle(heaps.receivers, self._take_over) or moved
        while self._augment():
            pass
        while self._trade_any():
            pass

    def _shift(self, p: int, old: int, new: int) -> None:
        self.led[old].discard(p)
        self.led[new].add(p)
        self.count[old] -= 1
        self.count[new] += 1
        self.heaps.touch(old)
        self.heaps.touch(new)

    def _make_leader(self, p: int, n: int) -> None:
        replicas = self.parts[p]
        old = replicas[0]
        i = replicas.index(n)
        replicas[0], replicas[i] = n, old  # a swap keeps the other followers' order
        self._shift(p, old, n)

    def _hand_over(self, u: int) -> bool:
        """Give one partition ``u`` leads to its least-led other replica with room."""
        count, lo, hi = self.count, self.lo, self.hi
        best: tuple[int, int, int] | None = None
        for p in self.led[u]:
            for n in self.parts[p][1:]:
                if count[n] < hi[n]:
                    candidate = (count[n] - lo[n], n, p)
                    if best is None or candidate < best:
                        best = candidate
            if best is not None and best[0] < 0:
                break  # a replica below its floor: good enough, stop scanning
        if best is None:
            return False
        self._make_leader(best[2], best[1])
        return True

    def _take_over(self, v: int) -> bool:
        """Take one partition from the most-led leader above its floor among v's partitions."""
        count, lo = self.count, self.lo
        best: tuple[int, int, int] | None = None
        for p in self.state.hosted[v]:
            u = self.parts[p][0]
            if u != v and count[u] > lo[u]:
                candidate = (lo[u] - count[u], u, p)
                if best is None or candidate < best:
                    best = candidate
        if best is None:
            return False
        self._make_leader(best[2], v)
        return True

    def _augment(self) -> bool:
        """One chain of hand-overs that fixes one node outside its range, if any exists."""
        count, lo, hi = self.count, self.lo, self.hi
        for start in self.nodes:
            if count[start] > hi[start] and self._augment_from(start):
                return True
        return any(count[n] < lo[n] and self._augment_into(n) for n in self.nodes)

    def _augment_from(self, start: int) -> bool:
        # BFS over "u leads p and n is a follower of p": n can take p from u.
        came: dict[int, tuple[int, int]] = {start: (-1, -1)}
        queue = deque([start])
        while queue:
            u = queue.popleft()
            for p in sorted(self.led[u]):
                for n in self.parts[p][1:]:
                    if n in came:
                        continue
                    came[n] = (u, p)
                    if self.count[n] < self.hi[n]:
                        self._walk(came, n, start, forwards=True)
                        return True
                    queue.append(n)
        return False

    def _augment_into(self, start: int) -> bool:
        for u, came in self._feeders(start):
            if self.count[u] > self.lo[u]:
                self._walk(came, u, start, forwards=False)
                return True
        return False

    def _feeders(self, start: int) -> Iterator[tuple[int, dict[int, tuple[int, int]]]]:
        """Nodes from which a chain of hand-overs leads into ``start``, nearest first.

        A BFS backwards: v is a follower of p, led by u, so v can take p from u. Each
        node comes with the BFS's ``came`` map, whose path back is its chain.
        """
        came: dict[int, tuple[int, int]] = {start: (-1, -1)}
        queue = deque([start])
        while queue:
            v = queue.popleft()
            for p in sorted(self.state.hosted[v] - self.led[v]):
                u = self.parts[p][0]
                if u in came:
                    continue
                came[u] = (v, p)
                yield u, came
                queue.append(u)

    def _walk(
        self, came: dict[int, tuple[int, int]], end: int, start: int, *, forwards: bool
    ) -> None:
        """Apply the hand-overs of a BFS path from ``end`` back to ``start``."""
        node = end
        while node != start:
            prev, p = came[node]
            # Forwards, ``node`` took p from ``prev``; backwards, ``prev`` takes p from it.
            self._make_leader(p, node if forwards else prev)
            node = prev

    def _trade_any(self) -> bool:
        """Last resort, moving data: shift one leadership, keeping replica counts in range."""
        count, lo, hi = self.count, self.lo, self.hi
        givers = [n for n in self.nodes if count[n] > hi[n]]
        if givers:
            # Nodes with leader room first (done in one step), then any node from which
            # a reordering chain leads on.
            takers = sorted(self.nodes, key=lambda n: (count[n] >= hi[n], count[n] - lo[n], n))
        else:
            takers = [n for n in self.nodes if count[n] < lo[n]]
            givers = [n for n in self.nodes if count[n] > lo[n]] if takers else []
        if any(self._relieve(u, v) for u in givers for v in takers if u != v):
            return True
        if any(count[n] > hi[n] for n in self.nodes):
            return False
        # Under-led nodes whose partitions' leaders are all at their floor: the move goes
        # to such a leader with room, and a chain of hand-overs carries it on.
        return any(
            self._relieve(u, w, then=v)
            for v in takers
            for w in [w for w, _ in self._feeders(v) if count[w] < hi[w]]
            for u in givers
            if u not in (v, w)
        )

    def _relieve(self, u: int, v: int, then: int | None = None) -> bool:
        """Move a replica ``u`` leads to ``v`` (alone, or traded for one ``v`` follows);
        with ``then``, keep it only if a chain of hand-overs carries it on to ``then``."""
        state = self.state
        single = state.count[u] > state.lo[u] and state.count[v] < state.hi[v]
        for p in sorted(self.led[u]):
            led = self.parts[p]
            if v in led or not state.accepts(led, u, v):
                continue
            if single:
                # Both replica counts stay in range: one move of the led replica.
                if self._try([(p, u, v)], then):
                    return True
                continue
            for q in sorted(state.hosted[v] - self.led[v]):
                follows = self.parts[q]
                if u not in follows and state.accepts(follows, v, u):
                    # v takes u's place as leader of p; u takes v's place in q.
                    if self._try([(p, u, v), (q, v, u)], then):
                        return True
                    break
        return False

    def _try(self, moves: list[tuple[int, int, int]], then: int | None = None) -> bool:
        """Apply moves (the first carries a leadership to its target); keep them if that
        target is within its leader range or a reordering chain takes the surplus on,
        or, with ``then``, if a chain carries a leadership on into ``then``."""
        state = self.state
        for p, out, into in moves:
            state.move(p, out, into)
        p, u, v = moves[0]
        self._shift(p, u, v)
        if then is not None:
            if self._augment_into(then):
                return True
        elif self.count[v] <= self.hi[v] or self._augment_from(v):
            return True
        self._shift(p, v, u)
        for p, out, into in reversed(moves):
            state.move(p, into, out)  # the same slot again: an exact undo
        return False
