"""``partitions`` (``kafka-topics --describe``), ``brokers`` and ``leadership_history``."""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..tables import LEADER_EPOCHS
from .base import Context, Snapshot, ms_to_time, to_table

TS: Final = pa.timestamp("ms", tz="UTC")
INTS: Final = pa.list_(pa.int32())

PARTITIONS: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader", pa.int32()),
        ("replicas", INTS),
        ("isr", INTS),
        ("elr", INTS),
        ("last_known_elr", INTS),
        ("adding_replicas", INTS),
        ("removing_replicas", INTS),
        ("state", pa.string()),
        ("leader_epoch", pa.int32()),
        ("partition_epoch", pa.int32()),
        ("preferred_leader", pa.int32()),
        ("is_preferred", pa.bool_()),
        ("under_replicated", pa.bool_()),
        ("unavailable", pa.bool_()),
        ("reassignment_in_progress", pa.bool_()),
        ("reassignment_step", pa.string()),
        ("election", pa.string()),
        ("controller_epoch", pa.int32()),
        ("topic_deleting", pa.bool_()),
        ("updated_at", TS),
    ]
)

BROKERS: Final = pa.schema(
    [
        ("node", pa.int32()),
        ("rack", pa.string()),
        ("alive", pa.bool_()),
        ("shutting_down", pa.bool_()),
        ("leaders", pa.int32()),
        ("preferred_leaders", pa.int32()),
        ("not_leading_preferred", pa.int32()),
        ("imbalance_ratio", pa.float64()),
        ("would_trigger_rebalance", pa.bool_()),
        ("rebalance_candidates", pa.int32()),
    ]
)

LEADERSHIP_HISTORY: Final = pa.schema(
    [
        ("time", TS),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("old_leader", pa.int32()),
        ("new_leader", pa.int32()),
        ("leader_changed", pa.bool_()),
        ("election", pa.string()),
        ("controller_epoch", pa.int32()),
        ("isr", INTS),
        ("log_offset", pa.int64()),
    ]
)


def live_nodes(snap: Snapshot) -> set[int] | None:
    """Registered, unfenced nodes; None when no node is registered at all (liveness unknown)."""
    nodes = snap.frame("nodes")
    if nodes.empty:
        return None
    return {
        int(n) for n, fenced in zip(nodes["node_id"], nodes["fenced"], strict=True) if not fenced
    }


def deleting_topics(snap: Snapshot) -> set[str]:
    topics = snap.frame("topics")
    return set(topics.loc[topics["deleting"].fillna(False).astype(bool), "name"])


def _ints(values: Any) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def partition_rows(snap: Snapshot) -> list[dict[str, Any]]:
    ps = snap.frame("partition_states")
    live = live_nodes(snap)
    deleting = deleting_topics(snap)
    rows = []
    for p in ps.to_dict("records"):
        replicas, isr = _ints(p["replicas"]), _ints(p["isr"])
        reassignment = p["reassignment"]
        leader = int(p["leader"])
        preferred = replicas[0] if replicas else None
        rows.append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "leader": leader,
                "replicas": replicas,
                "isr": isr,
                # KIP-966; a table written before the ELR existed has no such column.
                "elr": _ints(p.get("elr")),
                "last_known_elr": _ints(p.get("last_known_elr")),
                "adding_replicas": _ints(reassignment["adding_replicas"]) if reassignment else [],
                "removing_replicas": (
                    _ints(reassignment["removing_replicas"]) if reassignment else []
                ),
                "state": p["state"],
                "leader_epoch": p["leader_epoch"],
                "partition_epoch": p["partition_epoch"],
                "preferred_leader": preferred,
                "is_preferred": preferred is not None and leader == preferred,
                "under_replicated": len(isr) < len(replicas),
                "unavailable": leader < 0 or (live is not None and leader not in live),
                "reassignment_in_progress": reassignment is not None,
                "reassignment_step": reassignment["step"] if reassignment else None,
                "election": p["election"],
                "controller_epoch": p["controller_epoch"],
                "topic_deleting": p["topic"] in deleting,
                "updated_ms": p["updated_ms"],
            }
        )
    return rows


def partitions(snap: Snapshot, ctx: Context) -> pa.Table:
    rows = partition_rows(snap)
    if not rows:
        return PARTITIONS.empty_table()
    frame = pd.DataFrame(rows).sort_values(["topic", "partition"])
    frame["preferred_leader"] = frame["preferred_leader"].astype("Int32")
    frame["updated_at"] = ms_to_time(frame["updated_ms"])
    return to_table(frame, PARTITIONS)


def brokers(snap: Snapshot, ctx: Context) -> pa.Table:
    """Kafka's auto-rebalance check per broker: imbalance = preferred-but-not-led / preferred."""
    nodes = snap.frame("nodes")
    live = live_nodes(snap)
    counted = [r for r in partition_rows(snap) if not r["topic_deleting"]]
    leaders = Counter(r["leader"] for r in counted if r["leader"] >= 0)
    preferred = Counter(r["preferred_leader"] for r in counted if r["preferred_leader"] is not None)
    not_led = Counter(
        r["preferred_leader"]
        for r in counted
        if r["preferred_leader"] is not None and r["leader"] != r["preferred_leader"]
    )
    candidates = Counter(
        r["preferred_leader"]
        for r in counted
        if r["preferred_leader"] is not None
        and r["leader"] != r["preferred_leader"]
        and r["preferred_leader"] in r["isr"]
        and (live is None or r["preferred_leader"] in live)
        and not r["reassignment_in_progress"]
    )
    info = {int(n["node_id"]): n for n in nodes.to_dict("records")}
    ids = sorted(set(info) | set(leaders) | set(preferred))
    threshold = ctx.imbalance_percent / 100
    rows = []
    for node in ids:
        record = info.get(node)
        ratio = not_led[node] / preferred[node] if preferred[node] else 0.0
        rows.append(
            {
                "node": node,
                "rack": record["rack"] if record else None,
                "alive": bool(record is not None and not record["fenced"]),
                "shutting_down": bool(record is not None and record["shutting_down"]),
                "leaders": leaders[node],
                "preferred_leaders": preferred[node],
                "not_leading_preferred": not_led[node],
                "imbalance_ratio": ratio,
                "would_trigger_rebalance": ratio > threshold,
                "rebalance_candidates": candidates[node] if ratio > threshold else 0,
            }
        )
    if not rows:
        return BROKERS.empty_table()
    return to_table(pd.DataFrame(rows), BROKERS)


def leadership_history(snap: Snapshot, ctx: Context) -> pa.Table:
    """Every leader epoch of every partition, with the leader of the epoch before."""
    epochs = snap.frame(LEADER_EPOCHS)
    if epochs.empty:
        return LEADERSHIP_HISTORY.empty_table()
    frame = epochs.sort_values(["topic", "partition", "leader_epoch"]).reset_index(drop=True)
    previous = frame.groupby(["topic", "partition"])["leader"].shift(1)
    frame["old_leader"] = previous.astype("Int32")
    frame["new_leader"] = frame["leader"]
    frame["leader_changed"] = previous.isna() | (previous != frame["leader"])
    frame["time"] = ms_to_time(frame["updated_ms"])
    return to_table(frame.sort_values(["time", "topic", "partition"]), LEADERSHIP_HISTORY)
