"""Build warehouse tables by hand, with the real table schemas (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from kafkacoord.spark.tables import schemas
from kafkacoord.spark.warehouse import DELETED, KEY, Warehouse

NOW = 1_700_000_000_000


def put(
    wh: Warehouse, table: str, key_fields: tuple[str, ...], records: list[dict[str, Any]]
) -> None:
    schema = schemas()[table]
    full = [{name: r.get(name) for name in schema.names} for r in records]
    data = pa.Table.from_pylist(full, schema=schema)
    keys = ["|".join(str(r[f]) for f in key_fields).encode() for r in records]
    data = data.add_column(0, KEY, pa.array(keys, pa.binary()))
    data = data.add_column(1, DELETED, pa.array([False] * len(records)))
    wh.commit({table: data}, schemas())


def commit(group: str, topic: str, partition: int, offset: int, **extra: Any) -> dict[str, Any]:
    return {
        "group": group, "topic": topic, "partition": partition, "offset": offset,
        "leader_epoch": -1, "metadata": "", "commit_timestamp_ms": NOW - 1_000,
        "expire_timestamp_ms": None, "shard": 0, "log_offset": 1, "window": [], **extra,
    }  # fmt: skip


def group(name: str, members: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "group": name, "protocol_type": "consumer", "protocol": "range", "generation": 3,
        "leader": members[0]["member_id"] if members else None, "state_timestamp_ms": NOW - 500,
        "members": members, "shard": 1, "log_offset": 2, **extra,
    }  # fmt: skip


def member(member_id: str, assignment: bytes, host: str = "/10.0.0.1") -> dict[str, Any]:
    return {
        "member_id": member_id, "group_instance_id": None, "client_id": f"client-{member_id}",
        "client_host": host, "rebalance_timeout_ms": 300_000, "session_timeout_ms": 45_000,
        "subscription": b"", "assignment": assignment,
    }  # fmt: skip


def partition(
    topic: str, number: int, replicas: list[int], leader: int, **extra: Any
) -> dict[str, Any]:
    return {
        "topic": topic, "partition": number, "state": "ONLINE", "replicas": replicas,
        "isr": extra.pop("isr", replicas), "leader": leader, "leader_epoch": 1,
        "partition_epoch": 1, "reassignment": None, "election": "offline",
        "updated_ms": NOW, "controller_epoch": 1, "shard": 0, "log_offset": 1, **extra,
    }  # fmt: skip


def leader_epochs(topic: str, partition: int, *steps: tuple[int, str]) -> list[dict[str, Any]]:
    """Rows of ``leader_epochs``: one per (leader, election) step, epochs 0, 1, 2, …"""
    return [
        {"topic": topic, "partition": partition, "leader_epoch": e, "leader": leader,
         "election": kind, "updated_ms": NOW + e, "controller_epoch": 1, "replicas": [1, 2],
         "isr": [1, 2], "shard": 0, "log_offset": e}
        for e, (leader, kind) in enumerate(steps)
    ]  # fmt: skip


def node(node_id: int, *, fenced: bool = False, rack: str | None = None) -> dict[str, Any]:
    return {
        "node_id": node_id, "rack": rack, "endpoints": {}, "incarnation": "i", "node_epoch": 1,
        "fenced": fenced, "shutting_down": False, "registered_ms": NOW, "controller_epoch": 1,
        "shard": 0, "log_offset": 1,
    }  # fmt: skip


def warehouse(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "wh")
