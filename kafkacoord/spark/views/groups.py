"""``groups`` and ``group_members`` (``kafka-consumer-groups --describe --state/--members``).

One row per group, and one per member with its decoded assignment: classic groups from
their snapshots, KIP-848 consumer groups from their member and assignment records (the
protocol column shows the server assignor, the generation the group epoch).
"""

from __future__ import annotations

import re
from typing import Any, Final

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..assignment import decode_assignment, render, render_partitions
from .base import Context, Snapshot, ms_to_time, to_table

TS: Final = pa.timestamp("ms", tz="UTC")

GROUPS: Final = pa.schema(
    [
        ("group", pa.string()),
        ("state", pa.string()),
        ("protocol_type", pa.string()),
        ("protocol", pa.string()),
        ("generation", pa.int32()),
        ("leader", pa.string()),
        ("members", pa.int32()),
        ("coordinator_shard", pa.int32()),
        ("state_timestamp", TS),
        ("updated_at", TS),
        # KIP-848 groups ("consumer"); null for classic groups.
        ("group_type", pa.string()),
        ("group_epoch", pa.int32()),
        ("target_assignment_epoch", pa.int32()),
        # What started the rebalance the group's last record is the outcome of (a
        # GroupCause kind, e.g. member_joined), and whom or what it was about.
        ("rebalance_cause", pa.string()),
        ("rebalance_cause_detail", pa.string()),
    ]
)

GROUP_MEMBERS: Final = pa.schema(
    [
        ("group", pa.string()),
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("host", pa.string()),
        ("assignment", pa.string()),
        ("assigned_partitions", pa.int32()),
        ("session_timeout_ms", pa.int32()),
        ("rebalance_timeout_ms", pa.int32()),
        ("coordinator_shard", pa.int32()),
        # KIP-848 members; null in classic groups.
        ("member_epoch", pa.int32()),
        ("member_state", pa.string()),
        ("target_assignment", pa.string()),
    ]
)


def group_state(members: int) -> str:
    """Records hold only stable states: no members is Empty, else Stable (a tombstone is Dead)."""
    return "Stable" if members > 0 else "Empty"


def cause_columns(causes: Any) -> tuple[str | None, str | None]:
    """A record's ``cause`` (a GroupCause as a dict; None in records written before it)
    as the view's two columns: its kind, and the member and detail it names."""
    if not isinstance(causes, dict):
        return None, None
    who = causes.get("group_instance_id") or causes.get("member_id")
    parts = [f"member {who}" if who else None, causes.get("detail")]
    return causes.get("kind"), "; ".join(p for p in parts if p) or None


def groups(snap: Snapshot, ctx: Context) -> pa.Table:
    gm = snap.frame("group_metadata")
    consumer = _consumer_groups(snap)
    if gm.empty and not consumer:
        return GROUPS.empty_table()
    members = gm["members"].map(len).astype("int32")
    frame = pd.DataFrame(
        {
            "group": gm["group"],
            "state": members.map(group_state),
            "protocol_type": gm["protocol_type"],
            "protocol": gm["protocol"],
            "generation": gm["generation"],
            "leader": gm["leader"],
            "members": members,
            "coordinator_shard": gm["shard"],
            "state_timestamp": ms_to_time(gm["state_timestamp_ms"]),
            "updated_at": gm["log_time"],
            "group_type": "classic",
            **_cause_frame(gm),
        }
    )
    if consumer:
        frame = pd.concat([frame, pd.DataFrame(consumer)], ignore_index=True)
    for column in ("group_epoch", "target_assignment_epoch"):
        frame[column] = frame.get(column, pd.Series(None, index=frame.index)).astype("Int32")
    return to_table(frame.sort_values("group"), GROUPS)


def _cause_frame(frame: pd.DataFrame) -> dict[str, Any]:
    causes = frame.get("cause", pd.Series(None, index=frame.index, dtype=object))
    kinds, details = (
        zip(*(cause_columns(c) for c in causes), strict=True) if len(causes) else ((), ())
    )
    return {"rebalance_cause": list(kinds), "rebalance_cause_detail": list(details)}


_STABLE_MEMBER: Final = 2  # MemberState.STABLE in the assignment record
_MEMBER_STATES: Final = {0: "UNREVOKED_PARTITIONS", 1: "UNRELEASED_PARTITIONS", 2: "STABLE"}


def _consumer_groups(snap: Snapshot) -> list[dict[str, Any]]:
    """One row per KIP-848 group, its state derived as Kafka derives it."""
    groups_frame = snap.frame("consumer_groups")
    if groups_frame.empty:
        return []
    targets = dict(zip(*_columns(snap.frame("consumer_group_target_epochs"),
                                 "group", "assignment_epoch"), strict=True))  # fmt: skip
    by_group: dict[str, list[dict[str, Any]]] = {}
    for row in _consumer_member_rows(snap):
        by_group.setdefault(row["group"], []).append(row)
    rows = []
    causes = _cause_frame(groups_frame)
    for group, epoch, shard, at, cause, cause_detail in zip(
        *_columns(groups_frame, "group", "epoch", "shard", "log_time"),
        causes["rebalance_cause"], causes["rebalance_cause_detail"], strict=True,
    ):  # fmt: skip
        members = by_group.get(group, [])
        target = targets.get(group, 0)
        if not members:
            state = "Empty"
        elif epoch > target:
            state = "Assigning"
        elif all(m["_epoch"] == target and m["_state"] == _STABLE_MEMBER for m in members):
            state = "Stable"
        else:
            state = "Reconciling"
        assignors = [m["_assignor"] for m in members if m["_assignor"]]
        rows.append(
            {
                "group": group,
                "state": state,
                "protocol_type": "consumer",
                "protocol": max(sorted(set(assignors)), key=assignors.count)
                if assignors
                else "uniform",
                "generation": epoch,
                "leader": None,
                "members": len(members),
                "coordinator_shard": shard,
                "state_timestamp": None,
                "updated_at": at,
                "group_type": "consumer",
                "group_epoch": epoch,
                "target_assignment_epoch": target,
                "rebalance_cause": cause,
                "rebalance_cause_detail": cause_detail,
            }
        )
    return rows


def consumer_subscriptions(snap: Snapshot, topics: set[str]) -> set[tuple[str, str]]:
    """(group, topic) for every topic among ``topics`` a KIP-848 group's members subscribe
    to, by name or by regex."""
    meta = snap.frame("consumer_group_members")
    found: set[tuple[str, str]] = set()
    if meta.empty:
        return found
    for group, names, regex in zip(*_columns(meta, "group", "subscribed_topic_names",
                                             "subscribed_topic_regex"), strict=True):  # fmt: skip
        found.update((group, t) for t in names)
        if regex:
            try:
                pattern = re.compile(regex)
            except re.error:
                continue
            found.update((group, t) for t in topics if pattern.fullmatch(t))
    return found


def _columns(frame: pd.DataFrame, *names: str) -> list[Any]:
    if frame.empty:
        return [[] for _ in names]
    return [frame[n] for n in names]


def _consumer_member_rows(snap: Snapshot) -> list[dict[str, Any]]:
    meta = snap.frame("consumer_group_members")
    if meta.empty:
        return []
    assignments: dict[tuple[str, str], Any] = {}
    current = snap.frame("consumer_group_assignments")
    for group, member_id, epoch, state, assigned in zip(
        *_columns(current, "group", "member_id", "member_epoch", "state", "assigned_partitions"),
        strict=True,
    ):
        partitions = tuple((tp["topic"], p) for tp in assigned for p in tp["partitions"])
        assignments[(group, member_id)] = (epoch, state, partitions)
    targets: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}
    target_frame = snap.frame("consumer_group_targets")
    for group, member_id, assigned in zip(
        *_columns(target_frame, "group", "member_id", "partitions"), strict=True
    ):
        targets[(group, member_id)] = tuple(
            (tp["topic"], p) for tp in assigned for p in tp["partitions"]
        )
    rows = []
    for m in meta.to_dict("records"):
        key = (m["group"], m["member_id"])
        epoch, state, partitions = assignments.get(key, (-1, -1, ()))
        classic = m["classic_member_metadata"]
        rows.append(
            {
                "group": m["group"],
                "member_id": m["member_id"],
                "group_instance_id": m["instance_id"],
                "client_id": m["client_id"],
                "host": m["client_host"],
                "assignment": render_partitions(partitions),
                "assigned_partitions": len(partitions),
                "partitions": partitions,
                "session_timeout_ms": None if classic is None else classic["session_timeout_ms"],
                "rebalance_timeout_ms": m["rebalance_timeout_ms"],
                "coordinator_shard": m["shard"],
                "member_epoch": epoch if epoch >= 0 else None,
                "member_state": _MEMBER_STATES.get(state),
                "target_assignment": render_partitions(targets.get(key, ())),
                "_epoch": epoch,
                "_state": state,
                "_assignor": m["server_assignor"],
            }
        )
    return rows


def member_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """One dict per member of every group, with its decoded assignment."""
    gm = snap.frame("group_metadata")
    rows: list[dict[str, Any]] = [
        {k: v for k, v in row.items() if not k.startswith("_")}
        for row in _consumer_member_rows(snap)
    ]
    for group, shard, members in zip(gm["group"], gm["shard"], gm["members"], strict=True):
        for member in members:
            assignment = member["assignment"]
            decoded = decode_assignment(assignment) if assignment else None
            rows.append(
                {
                    "group": group,
                    "member_id": member["member_id"],
                    "group_instance_id": member["group_instance_id"],
                    "client_id": member["client_id"],
                    "host": member["client_host"],
                    "assignment": render(assignment),
                    "assigned_partitions": None if decoded is None else len(decoded.partitions),
                    "partitions": () if decoded is None else decoded.partitions,
                    "session_timeout_ms": member["session_timeout_ms"],
                    "rebalance_timeout_ms": member["rebalance_timeout_ms"],
                    "coordinator_shard": shard,
                }
            )
    return rows


def group_members(snap: Snapshot, ctx: Context) -> pa.Table:
    rows = member_rows(snap)
    if not rows:
        return GROUP_MEMBERS.empty_table()
    frame = pd.DataFrame(rows).sort_values(["group", "member_id"])
    for column in ("assigned_partitions", "member_epoch"):
        frame[column] = frame.get(column, pd.Series(None, index=frame.index)).astype("Int32")
    for column in ("member_state", "target_assignment"):
        if column not in frame:
            frame[column] = None
    return to_table(frame, GROUP_MEMBERS)


def owners(snap: Snapshot) -> pd.DataFrame:
    """(group, topic, partition) → the member it is assigned to."""
    rows = [
        {
            "group": m["group"],
            "topic": topic,
            "partition": partition,
            "consumer_id": m["member_id"],
            "host": m["host"],
            "client_id": m["client_id"],
        }
        for m in member_rows(snap)
        for topic, partition in m["partitions"]
    ]
    columns = ["group", "topic", "partition", "consumer_id", "host", "client_id"]
    frame = pd.DataFrame(rows, columns=columns)
    # Two members never own one partition in a valid assignment; keep one if they do.
    return frame.drop_duplicates(["group", "topic", "partition"])
