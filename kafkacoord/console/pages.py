"""The console's pages as plain data, built from the metadata image and group reads.

Pure functions, no I/O: the web layer fetches, these shape, the templates render (and
escape). Kept apart so the unit tests check the facts without a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkacoord.client.admin.rebalance import rebalance_status
from kafkacoord.client.admin.summary import controller_summary, node_state
from kafkacoord.client.explanations import PartitionStep, rule_words
from kafkacoord.client.instants import format_instant
from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.groups.consumer_protocol import assigned_partitions

from .cluster import GroupView
from .lag import LagHistory, Status
from .live import MetadataTracker

__all__ = [
    "group_page",
    "groups_page",
    "history_page",
    "nodes_page",
    "overview_page",
    "reassignments_page",
    "topic_page",
    "topics_page",
    "warehouse_history",
    "warehouse_lag",
    "warehouse_version",
]

TP = tuple[str, int]
# Kafka's leader.imbalance.per.broker.percentage: above it a node's leadership is skewed.
IMBALANCE_ALERT = 0.10
HISTORY_ROWS = 500


def _partition_row(value: PartitionValue, image: MetadataImage) -> dict[str, Any]:
    move = value.reassignment
    return {
        "partition": value.partition,
        "state": value.state.name,
        "leader": value.leader,
        "leader_epoch": value.leader_epoch,
        "replicas": list(value.replicas),
        "isr": list(value.isr),
        "elr": list(value.elr),
        "last_known_elr": list(value.last_known_elr),
        "adding": [] if move is None else list(move.adding_replicas),
        "removing": [] if move is None else list(move.removing_replicas),
        "under_replicated": len(value.isr) < image.target_replication(value),
        "offline": value.leader < 0,
    }


def overview_page(
    tracker: MetadataTracker, offsets_topic: str, groups: Mapping[str, str] | None
) -> dict[str, Any]:
    """``groups``: group id -> state, or None when the groups could not be read."""
    image = tracker.image
    controller = image.controller
    nodes = sorted(image.nodes.values(), key=lambda n: n.node_id)
    states = {n.node_id: node_state(n) for n in nodes}
    offline = image.unavailable()
    under = image.under_replicated()
    under_min = image.under_min_isr()
    imbalance = image.leader_imbalance()
    alerts: list[str] = []
    if controller is None:
        alerts.append("no active controller has written yet")
    alerts += [f"node {n} is fenced" for n, s in states.items() if s == "fenced"]
    if offline:
        alerts.append(f"{len(offline)} partitions have no leader")
    if under_min:
        alerts.append(f"{len(under_min)} partitions are under min.insync.replicas")
    alerts += [
        f"node {n}: {ratio:.0%} of the partitions it is preferred for are led elsewhere"
        for n, ratio in sorted(imbalance.items())
        if ratio > IMBALANCE_ALERT
    ]
    shards = [
        {"partition": v.partition, "leader": v.leader, "replicas": list(v.replicas),
         "isr": list(v.isr)}
        for v in image.partitions_of(offsets_topic)
    ]  # fmt: skip
    by_state: dict[str, int] = {}
    for state in (groups or {}).values():
        by_state[state] = by_state.get(state, 0) + 1
    return {
        "controller": controller_summary(controller),
        "nodes_up": sum(1 for s in states.values() if s == "live"),
        "nodes_fenced": sum(1 for s in states.values() if s == "fenced"),
        "nodes_total": len(states),
        "topics": len(image.topics),
        "partitions": image.partition_count(),
        "offline": [_tp(v) for v in offline],
        "under_replicated": [_tp(v) for v in under],
        "under_min_isr": [_tp(v) for v in under_min],
        "imbalance": [
            {"node": n, "ratio": ratio, "alert": ratio > IMBALANCE_ALERT}
            for n, ratio in sorted(imbalance.items())
        ],
        "shards": shards,
        "groups": None if groups is None else len(groups),
        "groups_by_state": dict(sorted(by_state.items())),
        "alerts": alerts,
    }


def _tp(value: PartitionValue) -> str:
    return f"{value.topic}-{value.partition}"


def nodes_page(tracker: MetadataTracker) -> list[dict[str, Any]]:
    image = tracker.image
    leaders = image.leader_counts()
    imbalance = image.leader_imbalance()
    return [
        {
            "id": node.node_id,
            "rack": node.rack or "",
            "state": node_state(node),
            "epoch": node.node_epoch,
            "endpoints": dict(sorted(node.endpoints.items())),
            "roles": list(node.roles),
            "leaders": leaders.get(node.node_id, 0),
            "replicas": len(image.replicas_on(node.node_id)),
            "imbalance": imbalance.get(node.node_id, 0.0),
        }
        for node in sorted(image.nodes.values(), key=lambda n: n.node_id)
    ]


def topics_page(tracker: MetadataTracker) -> list[dict[str, Any]]:
    image = tracker.image
    rows = []
    for name in sorted(image.topics):
        topic = image.topics[name]
        parts = image.partitions_of(name)
        rows.append(
            {
                "name": name,
                "partitions": len(parts),
                "replication_factor": topic.replication_factor,
                "under_replicated": sum(
                    1 for v in parts if len(v.isr) < image.target_replication(v)
                ),
                "offline": sum(1 for v in parts if v.leader < 0),
                "reassigning": sum(1 for v in parts if v.reassignment is not None),
                "deleting": topic.deleting,
            }
        )
    return rows


def topic_page(tracker: MetadataTracker, name: str) -> dict[str, Any] | None:
    return topic_page_of(tracker.image, name)


def topic_page_of(image: MetadataImage, name: str) -> dict[str, Any] | None:
    """The topic page of ``image``: today's, or one replayed as of an instant."""
    topic = image.topic(name)
    if topic is None:
        return None
    parts = image.partitions_of(name)
    nodes = sorted(set(image.nodes) | {r for v in parts for r in v.replicas})
    heat = []
    for node in nodes:
        cells = []
        for v in parts:
            move = v.reassignment
            if v.leader == node:
                role = "leader"
            elif move is not None and node in move.adding_replicas:
                role = "adding"
            elif move is not None and node in move.removing_replicas:
                role = "removing"
            elif node in v.isr:
                role = "follower"
            elif node in v.replicas:
                role = "out-of-sync"
            else:
                role = ""
            cells.append(role)
        heat.append({"node": node, "cells": cells})
    return {
        "name": name,
        "topic_id": topic.topic_id,
        "replication_factor": topic.replication_factor,
        "configs": dict(sorted(topic.configs.items())),
        "deleting": topic.deleting,
        "partitions": [_partition_row(v, image) for v in parts],
        "has_elr": any(v.elr or v.last_known_elr for v in parts),
        "heat": heat,
        "partition_ids": [v.partition for v in parts],
    }


def reassignments_page(tracker: MetadataTracker) -> dict[str, Any]:
    image = tracker.image
    running = []
    for v in image.reassignments():
        move = v.reassignment
        assert move is not None
        target = list(move.target_replicas)
        done = sum(1 for r in target if r in v.isr)
        running.append(
            {
                "topic": v.topic,
                "partition": v.partition,
                "original": list(move.original_replicas),
                "target": target,
                "adding": list(move.adding_replicas),
                "removing": list(move.removing_replicas),
                "step": move.step,
                "started_ms": move.started_ms,
                "progress": done / len(target) if target else 1.0,
                "caught_up": done,
            }
        )
    finished = [
        {
            "topic": f.topic,
            "partition": f.partition,
            "original": list(f.original),
            "target": list(f.target),
            "replicas": list(f.replicas),
            "completed": f.completed,
            "started_ms": f.started_ms,
            "finished_ms": f.at_ms,
        }
        for f in reversed(tracker.finished)
    ]
    status = rebalance_status(image)
    if status is not None:
        status["progress"] = (status["done"] + status["diverged"]) / max(1, status["moves"])
        status["running"] = status["state"] in ("RUNNING", "STOPPING")
    return {"running": running, "finished": finished[:HISTORY_ROWS], "rebalance": status}


def history_page(tracker: MetadataTracker) -> list[dict[str, Any]]:
    return [
        {
            "at_ms": c.at_ms,
            "topic": c.topic,
            "partition": c.partition,
            "previous": c.previous,
            "leader": c.leader,
            "leader_epoch": c.leader_epoch,
            "election": c.election,
        }
        for c in list(reversed(tracker.leader_changes))[:HISTORY_ROWS]
    ]


def warehouse_history(warehouse: Path) -> list[dict[str, Any]]:
    """Leadership changes from a views warehouse's ``leadership_history`` view, newest first:
    it outlives compaction and deleted topics. Needs the ``spark`` extra (pyarrow)."""
    from kafkacoord.spark.views import read_view  # only with the spark extra

    rows = [r for r in read_view(warehouse, "leadership_history").to_pylist()
            if r["leader_changed"]]  # fmt: skip
    rows.sort(key=lambda r: (r["time"], r["topic"], r["partition"]), reverse=True)
    return [
        {
            "at_ms": int(r["time"].timestamp() * 1000),
            "topic": r["topic"],
            "partition": r["partition"],
            "previous": -1 if r["old_leader"] is None else r["old_leader"],
            "leader": -1 if r["new_leader"] is None else r["new_leader"],
            "leader_epoch": r["leader_epoch"],
            "election": r["election"] or "unknown",
        }
        for r in rows[:HISTORY_ROWS]
    ]


def groups_page(listed: Mapping[str, tuple[str, str]], lag: LagHistory) -> list[dict[str, Any]]:
    """``listed``: group id -> (state, protocol type)."""
    rows = []
    for group, (state, protocol_type) in sorted(listed.items()):
        status, _ = lag.status(group)
        series = lag.total(group)
        rows.append(
            {
                "group": group,
                "state": state,
                "protocol_type": protocol_type or "(simple)",
                "lag": series[-1][1] if series else None,
                "status": status.name,
            }
        )
    return rows


def group_page(view: GroupView, lag: LagHistory) -> dict[str, Any]:
    described = view.described
    owners: dict[TP, tuple[str, str, str]] = {}
    members = []
    for m in described.members:
        parts = assigned_partitions(m.assignment)
        for tp in parts:
            owners[tp] = (m.member_id, m.client_id, m.client_host)
        members.append(
            {
                "member_id": m.member_id,
                "instance": m.group_instance_id or "",
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": [f"{t}-{p}" for t, p in parts],
            }
        )
    status, per = lag.status(described.group_id)
    offsets = []
    for tp in sorted(set(view.committed) | set(owners)):
        current = view.committed.get(tp)
        end = view.ends.get(tp)
        owner = owners.get(tp)
        offsets.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "committed": current,
                "end": end,
                "lag": None if current is None or end is None else max(0, end - current),
                "owner": "" if owner is None else owner[0],
                "client_id": "" if owner is None else owner[1],
                "status": per.get(tp, Status.OK).name,
            }
        )
    return {
        "group": described.group_id,
        "state": described.state,
        "protocol_type": described.protocol_type or "(simple)",
        "protocol": described.protocol,
        "generation": described.generation,
        "leader": described.leader or "",
        "members": members,
        "offsets": offsets,
        "status": status.name,
        "total_lag": sum(o["lag"] or 0 for o in offsets),
        "error": view.error,
    }


def lag_series(
    group: str, lag: LagHistory, stored: Sequence[tuple[int, int]] = ()
) -> dict[str, Any]:
    """The chart's data: seconds since the epoch (uPlot's time scale) and the summed lag.

    ``stored`` (time, summed lag) from the views warehouse extends the ring back in time:
    only its points older than the ring's first are drawn.
    """
    series = lag.total(group)
    first = series[0][0] if series else None
    older = [p for p in sorted(stored) if first is None or p[0] < first]
    points = older + series
    return {"t": [at / 1000 for at, _ in points], "lag": [value for _, value in points],
            "stored": len(older)}  # fmt: skip


def warehouse_version(warehouse: Path) -> int:
    """The views warehouse's manifest version: what it holds changes only with it."""
    from kafkacoord.spark.warehouse import Warehouse  # only with the spark extra

    return Warehouse(warehouse).manifest().version


def warehouse_lag(
    warehouse: Path, group: str, *, now_ms: int | None = None
) -> list[tuple[int, int]]:
    """(time, summed lag) of ``group`` from a views warehouse's ``lag_history`` view,
    oldest first. Needs the ``spark`` extra (pyarrow)."""
    import pyarrow.compute as pc

    from kafkacoord.spark.views import read_view  # only with the spark extra

    table = read_view(warehouse, "lag_history", now_ms=now_ms)
    rows = table.filter(pc.equal(table.column("group"), group))
    sums: dict[int, int] = {}
    times = rows.column("time").cast("int64").to_pylist()  # ms since the epoch
    for at, value in zip(times, rows.column("lag").to_pylist(), strict=True):
        sums[at] = sums.get(at, 0) + (value or 0)
    return sorted(sums.items())


def partition_timeline(steps: list[PartitionStep]) -> list[dict[str, Any]]:
    """The partition page's decisions, newest first: when, what changed and why."""
    return [
        {
            "when": format_instant(step.time_ms),
            "what": step.text.split(" ", 1)[1],
            "cause": step.cause_text,
            "rule": rule_words(step.rule) if step.rule else "",
            "offset": step.offset,
        }
        for step in reversed(steps)
    ]
