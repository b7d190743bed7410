"""``groups`` and ``group_members`` (``kafka-consumer-groups --describe --state/--members``).

One row per group, and one per member with its decoded assignment.
"""

from __future__ import annotations

from typing import Any, Final

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..assignment import decode_assignment, render
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
    ]
)


def group_state(members: int) -> str:
    """Records hold only stable states: no members is Empty, else Stable (a tombstone is Dead)."""
    return "Stable" if members > 0 else "Empty"


def groups(snap: Snapshot, ctx: Context) -> pa.Table:
    gm = snap.frame("group_metadata")
    if gm.empty:
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
        }
    ).sort_values("group")
    return to_table(frame, GROUPS)


def member_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """One dict per member of every group, with its decoded assignment."""
    gm = snap.frame("group_metadata")
    rows: list[dict[str, Any]] = []
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
    frame["assigned_partitions"] = frame["assigned_partitions"].astype("Int32")
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
