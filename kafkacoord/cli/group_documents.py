"""``groups describe --output json``: one document with the group, its members and its
offsets, whatever the table flags (schema: ``schemas/groups-describe.json``)."""

from __future__ import annotations

from typing import Any

from kafkacoord.cli.common import ExitCode, fail
from kafkacoord.cli.group_sources import GroupSource
from kafkacoord.coordinator.groups.consumer_protocol import assigned_partitions
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g


def group_document(source: GroupSource, group: str) -> dict[str, Any]:
    """``groups describe --output json``: the group, its members and its offsets (now,
    or as of the source's instant)."""
    admin = source.reads
    [consumer] = admin.describe_consumer_groups([group])
    document: dict[str, Any] = {"group": group, "coordinator_shard": source.shard}
    members: list[dict[str, Any]] = []
    if consumer.error is ErrorCode.NONE and consumer.state != "Dead":
        document.update(type="Consumer", state=consumer.state,
                        assignment_strategy=consumer.assignor_name,
                        group_epoch=consumer.group_epoch,
                        assignment_epoch=consumer.assignment_epoch)  # fmt: skip
        for m in consumer.members:
            members.append({
                "member_id": m.member_id, "group_instance_id": m.instance_id,
                "client_id": m.client_id, "host": m.client_host,
                "assignment": _pairs(m.assignment), "member_epoch": m.member_epoch,
                "member_state": m.state, "target_assignment": _pairs(m.target_assignment),
            })  # fmt: skip
    else:
        [described] = admin.describe_groups([group])
        if described.error is not ErrorCode.NONE or described.state == "Dead":
            fail(f"Consumer group '{group}' does not exist{source.when}.", ExitCode.NOT_FOUND)
        document.update(type="Classic", state=described.state,
                        assignment_strategy=described.protocol or None,
                        group_epoch=None, assignment_epoch=None)  # fmt: skip
        for dm in described.members:
            members.append({
                "member_id": dm.member_id, "group_instance_id": dm.group_instance_id,
                "client_id": dm.client_id, "host": dm.client_host,
                "assignment": [{"topic": t, "partition": p}
                               for t, p in assigned_partitions(dm.assignment)],
                "member_epoch": None, "member_state": None, "target_assignment": None,
            })  # fmt: skip
    document["members"] = members
    owners = {(a["topic"], a["partition"]): m for m in members for a in m["assignment"]}
    committed = admin.committed(group)
    partitions = sorted(set(committed) | set(owners))
    ends = source.ends(partitions) if partitions else {}
    offsets = []
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        owner = owners.get(tp)
        offsets.append({
            "topic": tp[0], "partition": tp[1], "current_offset": current,
            "log_end_offset": end,
            "lag": None if current is None or end is None else max(end - current, 0),
            "consumer_id": owner and owner["member_id"], "host": owner and owner["host"],
            "client_id": owner and owner["client_id"],
        })  # fmt: skip
    document["offsets"] = offsets
    return document


def _pairs(assignment: list[g.HeartbeatTopicPartitions]) -> list[dict[str, Any]]:
    return [{"topic": a.topic, "partition": p} for a in assignment for p in a.partitions]
