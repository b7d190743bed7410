"""Server-side assignors: time to assign a large group (pure CPU, no broker).

Builds a group of --members members on --topics topics of --partitions-per-topic partitions
(seeded member ids, random like Kafka's), then times each scenario --repeat times:

- uniform_fresh:  every member subscribes to every topic, nothing assigned yet
- uniform_join:   the same group, one member joins (everyone's "assigned" is the fresh result)
- uniform_hetero: each member subscribes to a random half of the topics, nothing assigned yet
- uniform_hetero_join: that group, one member joins (reported, not part of the target)
- range_fresh / range_join: as uniform_fresh and uniform_join, with the range assignor

Each result is checked (every subscribed partition assigned once, only to subscribers; balance
within one where subscriptions are equal; a join moves only what the new member receives),
outside the timing. Times are medians of the repetitions. --profile prints the top functions
of one run of each scenario (cProfile) to stderr.

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkacoord.coordinator.groups.assignors.server import (
    GroupAssignment,
    range_assign,
    uniform_assign,
)

TARGET_S = 1.0

Members = dict[str, dict[str, Any]]
Assignor = Callable[[Members, Mapping[str, int]], GroupAssignment]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def member_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def with_assigned(members: Members, result: GroupAssignment) -> Members:
    return {m: {**spec, "assigned": result.get(m, {})} for m, spec in members.items()}


def check(members: Members, topics: Mapping[str, int], result: GroupAssignment) -> None:
    """Every subscribed partition exactly once, only to a subscriber."""
    seen: set[tuple[str, int]] = set()
    for member, held in result.items():
        subscribed = set(members[member]["topics"])
        for topic, parts in held.items():
            assert topic in subscribed, (member, topic)
            for p in parts:
                assert (topic, p) not in seen, (topic, p)
                seen.add((topic, p))
    wanted = {t for spec in members.values() for t in spec["topics"]}
    assert len(seen) == sum(topics[t] for t in wanted)


def sizes(result: GroupAssignment) -> list[int]:
    return [sum(map(len, held.values())) for held in result.values()]


def moved(before: GroupAssignment, after: GroupAssignment) -> int:
    """Partitions whose owner changed (a partition new to the group does not count)."""
    owner = {(t, p): m for m, held in before.items() for t, parts in held.items() for p in parts}
    return sum(
        1
        for m, held in after.items()
        for t, parts in held.items()
        for p in parts
        if owner.get((t, p), m) != m
    )


def timed(
    name: str,
    assignor: Assignor,
    members: Members,
    topics: Mapping[str, int],
    args: argparse.Namespace,
) -> tuple[GroupAssignment, dict[str, float]]:
    runs: list[float] = []
    result: GroupAssignment = {}
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = assignor(members, topics)
        runs.append(time.perf_counter() - started)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        assignor(members, topics)
        profiler.disable()
        log(f"--- profile: {name}")
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(12)
    check(members, topics, result)
    stats = {
        "median_s": round(statistics.median(runs), 4),
        "min_s": round(min(runs), 4),
        "max_s": round(max(runs), 4),
    }
    return result, stats


def join(
    name: str,
    assignor: Assignor,
    members: Members,
    topics: Mapping[str, int],
    *,
    fresh: GroupAssignment,
    newcomer: tuple[str, dict[str, Any]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    joined = with_assigned(members, fresh)
    joined[newcomer[0]] = newcomer[1]
    result, stats = timed(name, assignor, joined, topics, args)
    moves = moved(fresh, result)
    received = sum(map(len, result[newcomer[0]].values()))
    return {**stats, "moved": moves, "new_member_received": received}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile each scenario")
    args = parser.parse_args()
    args.repeat = max(1, min(args.repeat, 50))

    rng = random.Random(args.seed)
    topic_names = [f"topic-{i:03d}" for i in range(args.topics)]
    topics = dict.fromkeys(topic_names, args.partitions_per_topic)
    partitions = args.topics * args.partitions_per_topic
    ids = [member_id(rng) for _ in range(args.members)]
    newcomer_id = member_id(rng)
    homogeneous: Members = {m: {"topics": list(topic_names)} for m in ids}
    half = args.topics // 2
    heterogeneous: Members = {m: {"topics": rng.sample(topic_names, half)} for m in ids}
    log(f"{args.members} members, {partitions} partitions, {args.repeat} runs per scenario")

    scenarios: dict[str, dict[str, Any]] = {}
    for name, assignor in (("uniform", uniform_assign), ("range", range_assign)):
        fresh, stats = timed(f"{name}_fresh", assignor, homogeneous, topics, args)
        spread = max(sizes(fresh)) - min(sizes(fresh))
        if name == "uniform":
            assert spread <= 1, spread
        scenarios[f"{name}_fresh"] = {**stats, "spread": spread}
        log(f"{name}_fresh: {scenarios[f'{name}_fresh']}")
        newcomer = (newcomer_id, {"topics": list(topic_names)})
        result = join(
            f"{name}_join", assignor, homogeneous, topics, fresh=fresh, newcomer=newcomer, args=args
        )
        if name == "uniform":
            assert result["moved"] == result["new_member_received"], result
        scenarios[f"{name}_join"] = result
        log(f"{name}_join: {result}")

    hetero, stats = timed("uniform_hetero", uniform_assign, heterogeneous, topics, args)
    counts = sizes(hetero)
    scenarios["uniform_hetero"] = {**stats, "spread": max(counts) - min(counts)}
    log(f"uniform_hetero: {scenarios['uniform_hetero']}")
    newcomer = (newcomer_id, {"topics": rng.sample(topic_names, half)})
    result = join(
        "uniform_hetero_join",
        uniform_assign,
        heterogeneous,
        topics,
        fresh=hetero,
        newcomer=newcomer,
        args=args,
    )
    scenarios["uniform_hetero_join"] = result
    log(f"uniform_hetero_join: {result}")

    timed_fields = {
        "uniform_fresh_s": scenarios["uniform_fresh"]["median_s"],
        "uniform_join_s": scenarios["uniform_join"]["median_s"],
        "uniform_hetero_s": scenarios["uniform_hetero"]["median_s"],
        "range_fresh_s": scenarios["range_fresh"]["median_s"],
        "range_join_s": scenarios["range_join"]["median_s"],
    }
    print(
        json.dumps(
            {
                **timed_fields,
                "uniform_hetero_join_s": scenarios["uniform_hetero_join"]["median_s"],
                "members": args.members,
                "partitions": partitions,
                "repeat": args.repeat,
                "scenarios": scenarios,
                "target_s": TARGET_S,
                "ok": all(s < TARGET_S for s in timed_fields.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
