"""The cluster summary of ``kafkacoord status``, built from what the admin clients read.

Pure: the metadata image, the listed groups and their lag come in; a JSON-ready dict
goes out. The command line renders it as text or prints it as JSON; the console's
pages show its node states and controller.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from kafkacoord.codecs.models import ControllerValue, NodeValue, PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage

TP = tuple[str, int]
FIRST = 5
"""Problem partitions listed by name; the rest are counted."""


def node_state(node: NodeValue) -> str:
    if node.fenced:
        return "fenced"
    return "shutting_down" if node.shutting_down else "live"


def controller_summary(controller: ControllerValue | None) -> dict[str, int] | None:
    if controller is None:
        return None
    return {
        "node_id": controller.node_id,
        "epoch": controller.epoch,
        "activated_ms": controller.activated_ms,
    }


def group_lag(committed: Mapping[TP, int], ends: Mapping[TP, int]) -> int | None:
    """Total lag of one group: end minus committed over its partitions (``None``: unknown)."""
    if any(tp not in ends for tp in committed):
        return None
    return sum(max(ends[tp] - offset, 0) for tp, offset in committed.items())


def partition_document(value: PartitionValue) -> dict[str, Any]:
    return {
        "topic": value.topic,
        "partition": value.partition,
        "leader": value.leader,
        "replicas": list(value.replicas),
        "isr": list(value.isr),
        "elr": list(value.elr),
        "last_known_elr": list(value.last_known_elr),
    }


def _problem(values: Iterable[PartitionValue]) -> dict[str, Any]:
    ordered = sorted(values, key=lambda v: (v.topic, v.partition))
    return {"count": len(ordered), "first": [partition_document(v) for v in ordered[:FIRST]]}


def cluster_summary(
    image: MetadataImage,
    offsets_topic: str,
    groups: Mapping[str, str] | None,
    lags: Mapping[str, int | None],
    *,
    groups_error: str | None = None,
) -> dict[str, Any]:
    """``groups`` maps group id to state (``None``: groups could not be listed)."""
    controller = image.controller
    nodes = [
        {
            "id": node_id,
            "roles": list(node.roles),
            "state": node_state(node),
            "rack": node.rack,
            "epoch": node.node_epoch,
        }
        for node_id, node in sorted(image.nodes.items())
    ]
    shards = [
        {"partition": v.partition, "leader": v.leader, "replicas": list(v.replicas),
         "isr": list(v.isr)}
        for v in image.partitions_of(offsets_topic)
    ]  # fmt: skip
    listed = dict(groups or {})
    known = [lag for lag in lags.values() if lag is not None]
    return {
        "controller": controller_summary(controller),
        "nodes": nodes,
        "offsets_shards": shards,
        "partitions": {
            "total": image.partition_count(),
            "under_replicated": _problem(image.under_replicated()),
            "offline": _problem(image.unavailable()),
        },
        "groups": {
            "count": None if groups is None else len(listed),
            "by_state": dict(sorted(Counter(listed.values()).items())),
            "total_lag": sum(known),
            "groups": [
                {"group": group, "state": state, "lag": lags.get(group)}
                for group, state in sorted(listed.items())
            ],
            "error": groups_error,
        },
    }


__all__ = ["FIRST", "cluster_summary", "controller_summary", "group_lag", "node_state"]
