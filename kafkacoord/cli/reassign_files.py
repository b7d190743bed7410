"""kafka-reassign-partitions' JSON files: read, write, and propose (``--generate``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kafkacoord.coordinator.controller.placement import assign_replicas

TP = tuple[str, int]


class ReassignmentFileError(ValueError):
    """A reassignment or topics-to-move file is not in kafka-reassign-partitions' format."""


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReassignmentFileError(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ReassignmentFileError(f"{what} must be a JSON object")
    return data


def parse_topics_to_move(text: str) -> list[str]:
    """``{"version": 1, "topics": [{"topic": "foo"}, ...]}`` → topic names."""
    data = _load(text, "topics-to-move file")
    topics = data.get("topics")
    if not isinstance(topics, list) or not topics:
        raise ReassignmentFileError('topics-to-move file needs a non-empty "topics" list')
    names: list[str] = []
    for entry in topics:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ReassignmentFileError(f'each topic entry needs a "topic" string: {entry!r}')
        names.append(entry["topic"])
    return names


def parse_reassignment(text: str) -> dict[TP, list[int]]:
    """``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}`` → targets."""
    data = _load(text, "reassignment file")
    partitions = data.get("partitions")
    if not isinstance(partitions, list) or not partitions:
        raise ReassignmentFileError('reassignment file needs a non-empty "partitions" list')
    targets: dict[TP, list[int]] = {}
    for entry in partitions:
        try:
            topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        except (KeyError, TypeError) as exc:
            raise ReassignmentFileError(
                f'each partition needs "topic", "partition" and "replicas": {entry!r}'
            ) from exc
        ok = isinstance(topic, str) and isinstance(partition, int) and isinstance(replicas, list)
        if not ok or not all(isinstance(r, int) for r in replicas) or not replicas:
            raise ReassignmentFileError(f"malformed partition entry: {entry!r}")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentFileError(f"duplicate replicas in {topic}-{partition}: {replicas}")
        if (topic, partition) in targets:
            raise ReassignmentFileError(f"{topic}-{partition} is listed twice")
        targets[(topic, partition)] = list(replicas)
    return targets


def format_reassignment(assignment: Mapping[TP, Sequence[int]]) -> str:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose(
    current: Mapping[TP, Sequence[int]],
    brokers: Mapping[int, str | None],
    *,
    rack_aware: bool = True,
    seed_start_index: int = -1,
) -> dict[TP, list[int]]:
    """Kafka's --generate: place each topic afresh on ``brokers``, keeping its partition
    count and replication factor."""
    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for (topic, partition), replicas in current.items():
        by_topic.setdefault(topic, {})[partition] = replicas
    racks = brokers if rack_aware else dict.fromkeys(brokers)
    proposal: dict[TP, list[int]] = {}
    for topic, partitions in sorted(by_topic.items()):
        rf = len(partitions[min(partitions)])
        placed = assign_replicas(racks, len(partitions), rf, fixed_start_index=seed_start_index)
        for partition, replicas in placed.items():
            proposal[(topic, partition)] = replicas
    return proposal
