"""JSON answers of the admin commands (``--output json``), one schema each in
``kafkacoord/cli/schemas`` (docs/cli-json.md). Field names follow the table columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from kafkacoord.cli.render import Selection
from kafkacoord.client.admin.summary import partition_document
from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

Document = dict[str, Any]
VerifyStatus = Literal["completed", "in_progress", "missing", "mismatch"]


def topic_list(image: MetadataImage) -> Document:
    return {"topics": sorted(image.topics)}


def _partition(value: PartitionValue) -> Document:
    moving = value.reassignment
    return {
        **partition_document(value),
        "adding_replicas": list(moving.adding_replicas) if moving else [],
        "removing_replicas": list(moving.removing_replicas) if moving else [],
    }


def topic_descriptions(selected: Selection, filtered: bool) -> Document:
    """With a partition filter, only topics with a matching partition are listed."""
    return {
        "topics": [
            {
                "name": topic.name,
                "topic_id": topic.topic_id,
                "partition_count": count,
                "replication_factor": topic.replication_factor,
                "configs": dict(sorted(topic.configs.items())),
                "marked_for_deletion": topic.deleting,
                "partitions": [_partition(v) for v in kept],
            }
            for topic, kept, count in selected
            if kept or not filtered
        ]
    }


def node_state(fenced: bool, shutting_down: bool) -> str:
    return "FENCED" if fenced else "SHUTTING_DOWN" if shutting_down else "UNFENCED"


def node_list(image: MetadataImage) -> Document:
    leaders = image.leader_counts()
    return {
        "nodes": [
            {
                "id": node_id,
                "rack": node.rack,
                "state": node_state(node.fenced, node.shutting_down),
                "epoch": node.node_epoch,
                "roles": list(node.roles),
                "leaders": leaders.get(node_id, 0),
                "replicas": len(image.replicas_on(node_id)),
                "endpoints": dict(sorted(node.endpoints.items())),
            }
            for node_id, node in sorted(image.nodes.items())
        ]
    }


def reassignment_list(image: MetadataImage) -> Document:
    rows = []
    for value in image.reassignments():
        moving = value.reassignment
        assert moving is not None
        rows.append({
            "topic": value.topic, "partition": value.partition, "step": moving.step,
            "replicas": list(value.replicas), "target_replicas": list(moving.target_replicas),
            "adding_replicas": list(moving.adding_replicas),
            "removing_replicas": list(moving.removing_replicas), "isr": list(value.isr),
        })  # fmt: skip
    return {"reassignments": rows}


def verify_status(value: PartitionValue | None, target: Sequence[int]) -> VerifyStatus:
    """kafka-reassign-partitions --verify's verdict on one partition."""
    if value is None:
        return "missing"
    if value.reassignment is not None:
        return "in_progress"
    return "completed" if list(value.replicas) == list(target) else "mismatch"


def reassignment_verification(
    image: MetadataImage, targets: dict[tuple[str, int], list[int]]
) -> Document:
    partitions = []
    for (topic, partition), target in sorted(targets.items()):
        value = image.partition(topic, partition)
        partitions.append({
            "topic": topic, "partition": partition, "status": verify_status(value, target),
            "replicas": None if value is None else list(value.replicas),
            "target_replicas": list(target),
        })  # fmt: skip
    return {
        "complete": all(p["status"] == "completed" for p in partitions),
        "partitions": partitions,
    }


def election_outcome(error: ErrorCode) -> str:
    if error is ErrorCode.NONE:
        return "elected"
    return "not_needed" if error is ErrorCode.ELECTION_NOT_NEEDED else "failed"


def election_results(election_type: str, results: Sequence[api.PartitionResult]) -> Document:
    return {
        "election_type": election_type,
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "outcome": election_outcome(r.error),
                "error": r.error.name,
                "message": r.message,
            }
            for r in results
        ],
    }
