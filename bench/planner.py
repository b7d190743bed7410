"""Rebalance planner: plan time and moves on a large cluster (pure CPU, no broker).

Builds seeded assignments of --partitions partitions at --rf replicas on --nodes nodes in
--racks racks (rack spread met), then times ``plan_rebalance`` for each scenario:

- add_nodes:   --new-nodes empty nodes join a cluster whose partitions sit on the others
- drain:       --drain nodes of a balanced cluster are removed (decommissioned)
- dead_nodes:  --dead nodes of a balanced cluster vanish from the live set
- skewed:      a random placement skewed by Pareto node weights is balanced

For each: seconds, moves, the movement lower bound and their ratio, and whether every
goal holds (rack spread, distinct nodes, RF, drained nodes empty, replica counts within
the targets, preferred leaders within one of even). The balanced starting cluster is
itself a plan of a random placement (not timed). --profile prints the top functions of
one run of each scenario (cProfile) to stderr.

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import sys
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafkacoord.coordinator.controller.planner import (
    count_moves,
    movement_lower_bound,
    plan_rebalance,
)
from kafkacoord.coordinator.controller.planner_goals import (
    cluster_layout,
    even_range,
    replica_targets,
)

TARGET_S = 20.0

Assignment = dict[tuple[str, int], list[int]]
Racks = dict[int, str | None]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rack_of(node: int, racks: int) -> str:
    return f"rack-{node % racks:02d}"


def placement(
    nodes: Sequence[int], racks: Mapping[int, str | None], args: argparse.Namespace, seed: int
) -> Assignment:
    """Random rack-spread placement; with --skew, nodes are picked by Pareto weights."""
    rng = random.Random(seed)
    by_rack: dict[str | None, list[int]] = {}
    for node in nodes:
        by_rack.setdefault(racks[node], []).append(node)
    labels = sorted(by_rack, key=str)
    weights = {n: rng.paretovariate(args.skew) for n in nodes}
    assignment: Assignment = {}
    for p in range(args.partitions):
        chosen = rng.sample(labels, args.rf)
        replicas = [rng.choices(by_rack[r], [weights[n] for n in by_rack[r]])[0] for r in chosen]
        assignment[(f"topic-{p % 200:03d}", p // 200)] = replicas
    return assignment


def goals_met(
    before: Assignment,
    after: Assignment,
    racks: Mapping[int, str | None],
    remove: Collection[int],
) -> dict[str, bool]:
    layout = cluster_layout(racks, remove)
    eligible = set(layout.eligible)
    spread_ok = all(
        len(set(r)) == len(r) == len(before[k])
        and set(r) <= eligible
        and len({racks[n] for n in r}) >= layout.spread(len(r))
        for k, r in after.items()
    )
    counts = Counter(n for r in after.values() for n in r)
    targets = replica_targets(layout, (len(r) for r in after.values()))
    replicas_ok = all(lo <= counts[n] <= hi for n, (lo, hi) in targets.items())
    leaders = Counter(r[0] for r in after.values())
    nodes = layout.eligible
    ranges = even_range(len(after), [counts[n] for n in nodes])
    leaders_ok = all(lo <= leaders[n] <= hi for n, (lo, hi) in zip(nodes, ranges, strict=True))
    return {"rack_spread": spread_ok, "replicas": replicas_ok, "leaders": leaders_ok}


def run(
    name: str,
    before: Assignment,
    racks: Racks,
    remove: Collection[int],
    args: argparse.Namespace,
) -> dict[str, Any]:
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    after = plan_rebalance(before, racks, remove)
    seconds = time.perf_counter() - started
    if args.profile:
        profiler.disable()
        log(f"--- profile: {name}")
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(12)
    moves = count_moves(before, after)
    bound = movement_lower_bound(before, racks, remove)
    goals = goals_met(before, after, racks, remove)
    result = {
        "seconds": round(seconds, 3),
        "moves": moves,
        "lower_bound": bound,
        "moves_over_bound": round(moves / bound, 4) if bound else None,
        "goals_met": all(goals.values()),
        **({} if all(goals.values()) else {"goals": goals}),
    }
    log(f"{name}: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--racks", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=60_000)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--new-nodes", type=int, default=50, help="add_nodes: nodes added")
    parser.add_argument("--drain", type=int, default=10, help="drain: nodes removed")
    parser.add_argument("--dead", type=int, default=5, help="dead_nodes: nodes lost")
    parser.add_argument("--skew", type=float, default=1.2, help="Pareto shape of node weights")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile each scenario")
    args = parser.parse_args()

    nodes = list(range(args.nodes))
    racks: Racks = {n: rack_of(n, args.racks) for n in nodes}
    uniform = argparse.Namespace(**{**vars(args), "skew": 1e9})  # all weights ~1
    scenarios: dict[str, dict[str, Any]] = {}

    old = nodes[: args.nodes - args.new_nodes]
    before = placement(old, racks, uniform, args.seed)
    scenarios["add_nodes"] = run("add_nodes", before, racks, (), args)

    log("balancing a random placement for the drain and dead-node scenarios (not timed)")
    balanced = plan_rebalance(placement(nodes, racks, uniform, args.seed + 1), racks)
    step = args.nodes // max(args.drain, 1)
    drained = nodes[::step][: args.drain]
    scenarios["drain"] = run("drain", balanced, racks, drained, args)

    step = args.nodes // max(args.dead, 1)
    dead = set(nodes[step // 2 :: step][: args.dead])
    live = {n: r for n, r in racks.items() if n not in dead}
    scenarios["dead_nodes"] = run("dead_nodes", balanced, live, (), args)

    skewed = placement(nodes, racks, args, args.seed + 2)
    scenarios["skewed"] = run("skewed", skewed, racks, (), args)

    seconds = max(s["seconds"] for s in scenarios.values())
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "racks": args.racks,
                "partitions": args.partitions,
                "rf": args.rf,
                "scenarios": scenarios,
                "max_seconds": seconds,
                "target_s": TARGET_S,
                "within_target": seconds < TARGET_S,
                "all_goals_met": all(s["goals_met"] for s in scenarios.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
