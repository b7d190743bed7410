"""Reads a whole campaign history and names every anomaly, with the entries that show it.

The workload is an offsets register: each ``group/partition`` key has exactly one writer
process committing strictly increasing ints, so a value names the commit that wrote it.
Reads are ``fetch`` ops and the ``final`` observations taken after every fault healed.
Besides the register, role, epoch and assignment observations are checked for split brain
(two leaders, two owners) and for epochs that go backwards.

Every check sorts once and bisects, so a history of a few hundred thousand entries takes
seconds, not hours.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .history import Entry, Observation, Op

ANOMALY_KINDS: tuple[str, ...] = (
    "lost_write",
    "stale_read",
    "phantom_read",
    "two_leaders",
    "epoch_regression",
    "double_ownership",
)

_MAX_LISTED = 10


@dataclass(frozen=True)
class Anomaly:
    kind: str
    key: str
    message: str
    entries: list[Entry]


@dataclass
class CheckResult:
    anomalies: list[Anomaly] = field(default_factory=list)
    ops_ok: int = 0
    ops_failed: int = 0
    ops_unknown: int = 0

    def counts(self) -> dict[str, int]:
        """Anomalies by kind; every kind is present so a report can show zeros."""
        counts = dict.fromkeys(ANOMALY_KINDS, 0)
        for anomaly in self.anomalies:
            counts[anomaly.kind] = counts.get(anomaly.kind, 0) + 1
        return counts

    @property
    def valid(self) -> bool:
        return not self.anomalies


def check(entries: list[Entry]) -> CheckResult:
    base = min((e.t0 for e in entries), default=0)
    ops = [e for e in entries if isinstance(e, Op)]
    observations = [e for e in entries if isinstance(e, Observation)]
    clock = _Clock(base)
    anomalies: list[Anomaly] = []
    anomalies += _register(ops, observations, clock)
    anomalies += _two_leaders(observations, clock)
    anomalies += _epoch_regressions(observations, clock)
    anomalies += _double_ownership(observations, clock)
    order = {kind: i for i, kind in enumerate(ANOMALY_KINDS)}
    anomalies.sort(
        key=lambda a: (
            order.get(a.kind, len(order)),
            a.key,
            min((e.t0 for e in a.entries), default=0),
            a.message,
        )
    )
    return CheckResult(
        anomalies=anomalies,
        ops_ok=sum(1 for op in ops if op.outcome == "ok"),
        ops_failed=sum(1 for op in ops if op.outcome == "fail"),
        ops_unknown=sum(1 for op in ops if op.outcome == "unknown"),
    )


class _Clock:
    """Formats monotonic nanoseconds as seconds since the history began."""

    def __init__(self, base: int) -> None:
        self.base = base

    def __call__(self, t: int) -> str:
        return f"{(t - self.base) / 1e9:.3f}s"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rank(value: object) -> float:
    """None (nothing committed) reads lower than every int."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return float("-inf")


def _shown(value: object) -> str:
    return "nothing" if value is None else str(value)


# --- offsets register ---------------------------------------------------------------------


def _register(ops: list[Op], observations: list[Observation], clock: _Clock) -> list[Anomaly]:
    commits: dict[str, list[Op]] = defaultdict(list)
    fetches: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "commit" and _is_int(op.value):
            commits[op.key].append(op)
        elif op.f == "fetch" and op.outcome == "ok" and (op.value is None or _is_int(op.value)):
            fetches[op.key].append(op)
    finals: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        if obs.kind == "final" and (obs.value is None or _is_int(obs.value)):
            finals[obs.key].append(obs)
    anomalies: list[Anomaly] = []
    for key in sorted(set(commits) | set(fetches) | set(finals)):
        key_commits, key_fetches, key_finals = commits[key], fetches[key], finals[key]
        acked = [c for c in key_commits if c.outcome == "ok"]
        anomalies += _lost_writes(key, acked, key_finals, clock)
        anomalies += _stale_reads(key, acked, key_fetches, key_finals, clock)
        anomalies += _phantom_reads(key, key_commits, key_fetches, key_finals, clock)
    return anomalies


def _lost_writes(
    key: str, acked: list[Op], finals: list[Observation], clock: _Clock
) -> list[Anomaly]:
    if not acked:
        return []
    # Several final reads of one key: the last one is what survived.
    final = max(finals, key=lambda o: o.t0) if finals else None
    floor = _rank(final.value) if final is not None else float("-inf")
    lost = sorted((c for c in acked if c.value > floor), key=lambda c: c.value)
    if not lost:
        return []
    top = lost[-1]
    if final is None:
        why = "no final read"
    else:
        why = f"final read at {clock(final.t0)} returned {_shown(final.value)}"
    message = (
        f"{len(lost)} acknowledged commit(s) lost, largest {top.value} by {top.process} "
        f"acknowledged at {clock(top.t1)}; {why}"
    )
    listed = sorted(lost[-_MAX_LISTED:], key=lambda c: c.t0)
    return [Anomaly("lost_write", key, message, list(listed))]


def _stale_reads(
    key: str, acked: list[Op], fetches: list[Op], finals: list[Observation], clock: _Clock
) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    # Acknowledged commits by completion, with the largest value acknowledged so far.
    by_t1 = sorted(acked, key=lambda c: c.t1)
    commit_t1 = [c.t1 for c in by_t1]
    commit_max = _running_max(by_t1)
    # Reads by completion likewise, for real-time monotonicity between reads.
    reads = sorted(fetches, key=lambda r: r.t1)
    read_t1 = [r.t1 for r in reads]
    read_max = _running_max(reads)
    for read in sorted(fetches, key=lambda r: (r.t0, r.t1, r.process)):
        seen = _rank(read.value)
        i = bisect.bisect_left(commit_t1, read.t0)
        if i and _rank(commit_max[i - 1].value) > seen:
            commit = commit_max[i - 1]
            message = (
                f"fetch by {read.process} at {clock(read.t0)} returned {_shown(read.value)} "
                f"but {commit.value} was acknowledged at {clock(commit.t1)}"
            )
            anomalies.append(Anomaly("stale_read", key, message, [commit, read]))
            continue
        j = bisect.bisect_left(read_t1, read.t0)
        if j and _rank(read_max[j - 1].value) > seen:
            earlier = read_max[j - 1]
            message = (
                f"fetch by {read.process} at {clock(read.t0)} returned {_shown(read.value)} "
                f"after fetch by {earlier.process} returned {earlier.value} "
                f"at {clock(earlier.t1)}"
            )
            anomalies.append(Anomaly("stale_read", key, message, [earlier, read]))
    if fetches:
        highest = max(fetches, key=lambda r: (_rank(r.value), -r.t1))
        for final in finals:
            if _rank(final.value) < _rank(highest.value):
                message = (
                    f"final read by {final.process} returned {_shown(final.value)} but "
                    f"fetch by {highest.process} returned {highest.value} "
                    f"at {clock(highest.t1)}"
                )
                anomalies.append(Anomaly("stale_read", key, message, [highest, final]))
    return anomalies


def _running_max(ops: list[Op]) -> list[Op]:
    """For each prefix of ``ops``, the op with the largest value (None lowest)."""
    out: list[Op] = []
    best: Op | None = None
    for op in ops:
        if best is None or _rank(op.value) > _rank(best.value):
            best = op
        out.append(best)
    return out


def _phantom_reads(
    key: str, commits: list[Op], fetches: list[Op], finals: list[Observation], clock: _Clock
) -> list[Anomaly]:
    # A value may be read once its commit was invoked (an unknown commit may land, even late);
    # a refused (fail) commit must never be read.
    invoked: dict[int, Op] = {}
    refused: dict[int, Op] = {}
    for commit in commits:
        table = refused if commit.outcome == "fail" else invoked
        held = table.get(commit.value)
        if held is None or commit.t0 < held.t0:
            table[commit.value] = commit
    anomalies: list[Anomaly] = []
    reads: list[tuple[Entry, int | None]] = [(r, r.t1) for r in fetches]
    reads += [(f, None) for f in finals]
    for read, before in sorted(reads, key=lambda rb: (rb[0].t0, rb[0].process)):
        if not _is_int(read.value):
            continue
        value: int = read.value
        what = (
            f"fetch by {read.process} at {clock(read.t0)}"
            if isinstance(read, Op)
            else f"final read by {read.process}"
        )
        writer = invoked.get(value)
        if writer is not None and (before is None or writer.t0 < before):
            continue
        if writer is not None:
            message = f"{what} returned {value} before its commit was invoked at {clock(writer.t0)}"
            involved: list[Entry] = [read, writer]
        elif value in refused:
            message = f"{what} returned {value}, whose commit was refused (fail)"
            involved = [refused[value], read]
        else:
            message = f"{what} returned {value}, which was never committed"
            involved = [read]
        anomalies.append(Anomaly("phantom_read", key, message, involved))
    return anomalies


# --- roles, epochs, assignments -----------------------------------------------------------


def _two_leaders(observations: list[Observation], clock: _Clock) -> list[Anomaly]:
    # (partition, leader epoch) -> process -> its first leader observation
    leaders: dict[tuple[str, int], dict[str, Observation]] = defaultdict(dict)
    for obs in sorted(observations, key=lambda o: o.t0):
        if obs.kind == "role" and obs.role == "leader" and obs.leader_epoch >= 0:
            leaders[obs.key, obs.leader_epoch].setdefault(obs.process, obs)
    anomalies: list[Anomaly] = []
    for (key, epoch), by_process in sorted(leaders.items()):
        if len(by_process) < 2:
            continue
        firsts = sorted(by_process.values(), key=lambda o: (o.t0, o.process))
        names = ", ".join(f"{o.process} at {clock(o.t0)}" for o in firsts)
        message = f"{key} leader epoch {epoch} taken by {len(firsts)} processes: {names}"
        anomalies.append(Anomaly("two_leaders", key, message, list(firsts)))
    return anomalies


def _epoch_regressions(observations: list[Observation], clock: _Clock) -> list[Anomaly]:
    # (observer, key, which epoch) -> observations in time order with their epoch
    series: dict[tuple[str, str, str], list[tuple[Observation, int]]] = defaultdict(list)
    for obs in sorted(observations, key=lambda o: o.t0):
        for name, value in _epochs_of(obs):
            series[obs.process, obs.key, name].append((obs, value))
    anomalies: list[Anomaly] = []
    for (process, key, name), seen in sorted(series.items()):
        for (prev, was), (cur, now) in itertools.pairwise(seen):
            if now < was:
                where = f" of {key}" if key else ""
                message = (
                    f"{process} saw {name}{where} go from {was} at {clock(prev.t0)} "
                    f"to {now} at {clock(cur.t0)}"
                )
                anomalies.append(Anomaly("epoch_regression", key, message, [prev, cur]))
    return anomalies


def _epochs_of(obs: Observation) -> Iterable[tuple[str, int]]:
    if obs.kind == "role" and obs.leader_epoch >= 0:
        yield "leader epoch", obs.leader_epoch
    elif obs.kind == "epoch" and obs.epoch >= 0:
        yield "epoch", obs.epoch
    elif obs.kind == "assignment":
        if obs.generation >= 0:
            yield "generation", obs.generation
        elif obs.epoch >= 0:
            yield "member epoch", obs.epoch


def _double_ownership(observations: list[Observation], clock: _Clock) -> list[Anomaly]:
    # (group, "generation"/"member epoch", n) -> partition -> member -> first observation
    owners: dict[tuple[str, str, int], dict[str, dict[str, Observation]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for obs in sorted(observations, key=lambda o: o.t0):
        if obs.kind != "assignment":
            continue
        if obs.generation >= 0:
            slot = (obs.key, "generation", obs.generation)
        elif obs.epoch >= 0:
            slot = (obs.key, "member epoch", obs.epoch)
        else:
            continue
        for partition in obs.partitions:
            owners[slot][partition].setdefault(obs.process, obs)
    anomalies: list[Anomaly] = []
    for (group, name, number), partitions in sorted(owners.items()):
        # Partitions shared by the same set of members make one anomaly.
        shared: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for partition, by_member in partitions.items():
            if len(by_member) > 1:
                shared[tuple(sorted(by_member))].append(partition)
        for members, parts in sorted(shared.items()):
            parts.sort()
            involved = sorted(
                {id(o): o for p in parts for o in partitions[p].values()}.values(),
                key=lambda o: (o.t0, o.process),
            )
            listed = ", ".join(parts[:_MAX_LISTED]) + (" ..." if len(parts) > _MAX_LISTED else "")
            message = (
                f"group {group} {name} {number}: {' and '.join(members)} "
                f"{'both' if len(members) == 2 else 'all'} own {listed} "
                f"(first at {clock(involved[0].t0)})"
            )
            anomalies.append(Anomaly("double_ownership", group, message, list(involved)))
    return anomalies
