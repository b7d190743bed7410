"""The uniform assignor for groups whose members subscribe to different topics.

Follows Kafka's ``UniformHeterogeneousAssignmentBuilder``, then goes further on balance:

1. Every member keeps its current partitions of topics it still subscribes to.
2. The other partitions are placed topic by topic, in Kafka's topic order (partitions per
   subscriber descending, then subscriber count ascending, then name), each on the subscriber
   with the fewest partitions (ties: member id). That settles how many each subscriber takes;
   with racks, which of them it takes is then a maximum rack matching
   (:func:`~kafkacoord.coordinator.groups.assignors.server.racks.rack_aware_fill`).
3. Per topic, partitions move from its most loaded holder to its least loaded subscriber while
   they differ by two or more; the topics are swept again until a sweep moves nothing. Kafka
   stops after 16 sweeps; here the sweeps always converge (each move lowers the sum of squared
   member loads), so no member can take a partition it is eligible for from a member with two
   or more partitions more than itself.
4. That local balance can still leave chains: Kafka's own example, members 1 and 2 on topic A
   and members 2 and 3 on topic B, can end at 9, 10 and 11 partitions. A breadth-first search
   from the most loaded members, along "holds a partition of a topic the next member
   subscribes to", finds a member two or more below; shifting one partition along each hop of
   that path moves the imbalance from its ends only. With no such path left the loads are as
   even as the subscriptions allow (the largest is smallest and the smallest is largest). The
   searches are bounded (:data:`MAX_CHAIN_ROUNDS`); step 3 runs again after them.

Moves only happen to improve balance, so a member keeps its partitions unless balance needs
them. A moving partition is, by preference, one that matches the receiver's rack, then one that
does not match the giver's, then the giver's highest numbered one.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from fractions import Fraction

from kafkacoord.coordinator.groups.assignors.server.model import Holdings, NormalizedGroup
from kafkacoord.coordinator.groups.assignors.server.racks import rack_aware_fill

__all__ = ["MAX_CHAIN_ROUNDS", "assign_heterogeneous"]

MAX_CHAIN_ROUNDS = 64
"""Path searches after the per-topic balance (each one a breadth-first search over the
subscriptions, shifting along every path it finds). Reached only by long chains of partially
overlapping subscriptions; step 3's local balance holds either way."""


def assign_heterogeneous(
    group: NormalizedGroup, replicas: list[dict[int, frozenset[str]]] | None
) -> Holdings:
    """Each member's new partitions, by topic index (``group.owned`` is updated in place)."""
    builder = _Builder(group, replicas)
    builder.fill()
    builder.balance_topics()
    if builder.balance_chains(MAX_CHAIN_ROUNDS):
        builder.balance_topics()
    return builder.held


class _Builder:
    def __init__(
        self, group: NormalizedGroup, replicas: list[dict[int, frozenset[str]]] | None
    ) -> None:
        self.group = group
        self.replicas = replicas
        self.racks = group.member_racks
        self.subscribers = group.subscribers()
        self.held: Holdings = group.owned
        # Per topic: holder -> its partitions (the same list objects as in ``held``).
        self.holders: list[dict[int, list[int]]] = [{} for _ in group.topic_names]
        for m, held in enumerate(self.held):
            for t, parts in held.items():
                self.holders[t][m] = parts
        self.load = [sum(map(len, held.values())) for held in self.held]
        self.topic_order = sorted(
            (t for t, subs in enumerate(self.subscribers) if subs),
            key=lambda t: (
                Fraction(-group.counts[t], len(self.subscribers[t])),
                len(self.subscribers[t]),
                t,
            ),
        )

    # ----------------------------------------------------------------- bookkeeping

    def _give(self, t: int, p: int, m: int) -> None:
        parts = self.holders[t].get(m)
        if parts is None:
            parts = self.holders[t][m] = self.held[m][t] = []
        parts.append(p)
        self.load[m] += 1

    def _move(self, t: int, giver: int, receiver: int) -> None:
        parts = self.holders[t][giver]
        p = self._pick(t, parts, giver, receiver)
        parts.remove(p)
        if not parts:
            del self.holders[t][giver]
            del self.held[giver][t]
        self.load[giver] -= 1
        self._give(t, p, receiver)

    def _pick(self, t: int, parts: list[int], giver: int, receiver: int) -> int:
        replicas = self.replicas
        if replicas is None or not replicas[t]:
            return parts[-1]
        topic = replicas[t]
        to_rack, from_rack = self.racks[receiver], self.racks[giver]
        fallback: int | None = None
        for p in reversed(parts):
            matching = topic.get(p, ())
            if to_rack in matching:
                return p
            if fallback is None and from_rack not in matching:
                fallback = p
        return parts[-1] if fallback is None else fallback

    # ----------------------------------------------------------------- step 2

    def fill(self) -> None:
        """Each topic's free partitions go, one at a time, to its least loaded subscriber.

        The counts are settled first (a heap of loads); which partition goes where is then free:
        without racks, runs of consecutive partitions in member id order; with racks, as many
        matching placements as those counts allow.
        """
        load = self.load
        for t in self.topic_order:
            taken = self.group.claimed[t]
            free = [p for p in range(self.group.counts[t]) if not taken[p]]
            if not free:
                continue
            subs = self.subscribers[t]
            # Local indices follow member id order, so they break ties the same way.
            heap = [(load[m], i) for i, m in enumerate(subs)]
            heapq.heapify(heap)
            share: dict[int, int] = {}
            for _ in free:
                level, i = heap[0]
                share[i] = share.get(i, 0) + 1
                heapq.heapreplace(heap, (level + 1, i))
            if self.replicas is not None and self.replicas[t]:
                need = [0] * len(subs)
                for i, k in share.items():
                    need[i] = k
                given = rack_aware_fill(
                    [(t, p) for p in free],
                    need,
                    extra_order=(),
                    free_extras=0,
                    member_racks=[self.racks[m] for m in subs],
                    replicas=self.replicas,
                )
                for i, parts in enumerate(given):
                    for _, p in parts:
                        self._give(t, p, subs[i])
                continue
            start = 0
            for i in sorted(share):
                for p in free[start : start + share[i]]:
                    self._give(t, p, subs[i])
                start += share[i]

    # ----------------------------------------------------------------- step 3

    def balance_topics(self) -> None:
        topics = [t for t in self.topic_order if len(self.subscribers[t]) >= 2]
        while sum(self._balance_topic(t) for t in topics):
            pass

    def _balance_topic(self, t: int) -> int:
        """Moves from the most loaded holder to the least loaded subscriber; how many.

        Heap entries are ``(load, member)``; one is stale when the member's load has changed
        since (a fresh entry was pushed then) and is dropped when it comes to the top.
        """
        load, subs, holders = self.load, self.subscribers[t], self.holders[t]
        if not holders:
            return 0
        low = min(map(load.__getitem__, subs))
        if max(map(load.__getitem__, holders)) - low < 2:
            return 0
        takers = [(load[m], m) for m in subs]
        heapq.heapify(takers)
        givers = [(-load[m], m) for m in holders]
        heapq.heapify(givers)
        moves = 0
        while True:
            while takers[0][0] != load[takers[0][1]]:
                heapq.heappop(takers)
            while givers and (-givers[0][0] != load[givers[0][1]] or givers[0][1] not in holders):
                heapq.heappop(givers)
            if not givers:
                return moves
            low, s = takers[0]
            h = givers[0][1]
            if load[h] - low < 2:
                return moves
            self._move(t, h, s)
            moves += 1
            heapq.heapreplace(takers, (load[s], s))
            heapq.heappush(takers, (load[h], h))
            heapq.heappop(givers)
            if h in holders:
                heapq.heappush(givers, (-load[h], h))
            heapq.heappush(givers, (-load[s], s))

    # ----------------------------------------------------------------- step 4

    def balance_chains(self, rounds: int) -> bool:
        """Shift along paths until none is left or ``rounds`` searches ran; whether it moved."""
        moved = False
        for _ in range(rounds):
            if not self._chain_round():
                return moved
            moved = True
        return moved

    def _chain_round(self) -> bool:
        """One search from the loads downwards; whether it shifted along at least one path.

        Sources are taken load level by load level, highest first, sharing one visited set: a
        member reached from a level-``L`` source reaches only members at ``L - 1`` or more (or
        the search at level ``L`` would have found them), so nothing it reaches can serve a
        lower level either. The first level whose search reaches a target shifts along as many
        paths as it can find (:meth:`_shift_paths`) and ends the round.
        """
        load, held, subscribers = self.load, self.held, self.subscribers
        eligible = [m for m, subs in enumerate(self.group.subscriptions) if subs]
        if not eligible:
            return False
        lowest = min(load[m] for m in eligible)
        levels: dict[int, list[int]] = {}
        for m in eligible:
            if load[m] >= lowest + 2:
                levels.setdefault(load[m], []).append(m)
        seen_member = bytearray(len(load))
        seen_topic = bytearray(len(subscribers))
        for level in sorted(levels, reverse=True):
            # Breadth-first layers: sources at 0, topics odd, members even.
            member_depth: dict[int, int] = {}
            topic_depth: dict[int, int] = {}
            for m in levels[level]:
                if not seen_member[m]:
                    seen_member[m] = 1
                    member_depth[m] = 0
            queue = deque(member_depth)
            targets: list[int] = []
            limit = level - 2
            while queue:
                x = queue.popleft()
                depth = member_depth[x] + 1
                for t in held[x]:
                    if seen_topic[t]:
                        continue
                    seen_topic[t] = 1
                    topic_depth[t] = depth
                    for y in subscribers[t]:
                        if not seen_member[y]:
                            seen_member[y] = 1
                            member_depth[y] = depth + 1
                            queue.append(y)
                            if load[y] <= limit:
                                targets.append(y)
            if targets and self._shift_paths(level, targets, member_depth, topic_depth):
                return True
        return False

    def _shift_paths(
        self,
        level: int,
        targets: list[int],
        member_depth: dict[int, int],
        topic_depth: dict[int, int],
    ) -> bool:
        """Shift one partition along each hop of paths from level-``level`` sources to
        ``targets``, as many paths as the search's layers yield; whether any.

        Each path is found walking back from its target, one layer at a time, through any
        current holder of the topic the member was reached by (not only the one the search
        came from), so that many targets can share the search. Members found to lead nowhere
        are skipped for the rest of the round.
        """
        load, holders, subscriptions = self.load, self.holders, self.group.subscriptions
        dead: set[int] = set()

        def hops_into(y: int) -> Iterator[tuple[int, int]]:
            """(topic, giver) pairs one layer back from member ``y``."""
            depth = member_depth[y]
            for t in subscriptions[y]:
                if topic_depth.get(t) == depth - 1:
                    for g in holders[t]:
                        if member_depth.get(g) == depth - 2 and g not in dead:
                            yield t, g

        shifted = False
        for target in targets:
            if load[target] > level - 2:
                continue
            path: list[tuple[int, int, int]] = []  # (giver, topic, receiver), target first
            stack = [hops_into(target)]
            while stack:
                step = next(stack[-1], None)
                if step is None:
                    stack.pop()
                    if path:
                        dead.add(path.pop()[0])
                    continue
                t, giver = step
                path.append((giver, t, path[-1][0] if path else target))
                if member_depth[giver] > 0:
                    stack.append(hops_into(giver))
                elif load[giver] == level:
                    break
                else:
                    dead.add(path.pop()[0])
            if not stack:
                dead.add(target)
                continue
            for giver, t, receiver in path:
                self._move(t, giver, receiver)
            shifted = True
        return shifted
