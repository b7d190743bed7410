"""Text output of the admin commands, in the Kafka tools' formats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kafkacoord.codecs.models import PartitionValue, TopicValue
from kafkacoord.coordinator.controller.image import MetadataImage


def _ids(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def describe_topic_header(topic: TopicValue, partitions: int) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    deleting = "\tMarkedForDeletion: true" if topic.deleting else ""
    return (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {partitions}\t"
        f"ReplicationFactor: {topic.replication_factor}\tConfigs: {configs}{deleting}"
    )


def describe_partition(value: PartitionValue) -> str:
    leader = "none" if value.leader < 0 else str(value.leader)
    line = (
        f"\tTopic: {value.topic}\tPartition: {value.partition}\tLeader: {leader}\t"
        f"Replicas: {_ids(value.replicas)}\tIsr: {_ids(value.isr)}\t"
        f"Elr: {_ids(value.elr)}\tLastKnownElr: {_ids(value.last_known_elr)}"
    )
    moving = value.reassignment
    if moving is not None:
        if moving.adding_replicas:
            line += f"\tAdding Replicas: {_ids(moving.adding_replicas)}"
        if moving.removing_replicas:
            line += f"\tRemoving Replicas: {_ids(moving.removing_replicas)}"
    return line


class PartitionFilter(NamedTuple):
    """kafka-topics --describe's partition filters; any set one keeps only matching ones."""

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False


Selection = list[tuple[TopicValue, list[PartitionValue], int]]


def select_partitions(
    image: MetadataImage, topics: Sequence[str] | None, only: PartitionFilter
) -> Selection:
    """Each named topic (all when none) with the partitions ``only`` keeps and its count."""
    names = sorted(image.topics) if not topics else list(topics)
    keep: set[tuple[str, int]] = set()
    if only.under_replicated:
        keep |= {(v.topic, v.partition) for v in image.under_replicated()}
    if only.unavailable:
        keep |= {(v.topic, v.partition) for v in image.unavailable()}
    if only.under_min_isr:
        keep |= {(v.topic, v.partition) for v in image.under_min_isr()}
    selected: Selection = []
    for name in names:
        topic = image.topic(name)
        if topic is None:
            continue
        partitions = image.partitions_of(name)
        kept = [v for v in partitions if not any(only) or (v.topic, v.partition) in keep]
        selected.append((topic, kept, len(partitions)))
    return selected


ALL_PARTITIONS = PartitionFilter()


def describe_topics(
    image: MetadataImage,
    topics: Sequence[str] | None = None,
    only: PartitionFilter = ALL_PARTITIONS,
) -> list[str]:
    """kafka-topics --describe; with a filter, only matching partitions and no headers."""
    lines: list[str] = []
    for topic, kept, count in select_partitions(image, topics, only):
        if not any(only):
            lines.append(describe_topic_header(topic, count))
        lines.extend(describe_partition(v) for v in kept)
    return lines


def node_table(image: MetadataImage) -> list[str]:
    leaders = image.leader_counts()
    rows = [("ID", "RACK", "STATE", "EPOCH", "ROLES", "LEADERS", "REPLICAS", "ENDPOINTS")]
    for node_id, node in sorted(image.nodes.items()):
        state = "FENCED" if node.fenced else "SHUTTING_DOWN" if node.shutting_down else "UNFENCED"
        endpoints = ",".join(f"{k}={v}" for k, v in sorted(node.endpoints.items()))
        rows.append((
            str(node_id), node.rack or "-", state, str(node.node_epoch),
            ",".join(node.roles) or "-", str(leaders.get(node_id, 0)),
            str(len(image.replicas_on(node_id))), endpoints or "-",
        ))  # fmt: skip
    return table(rows)


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip


def reassignment_lines(image: MetadataImage) -> list[str]:
    rows = [("TOPIC", "PARTITION", "STEP", "REPLICAS", "TARGET", "ADDING", "REMOVING", "ISR")]
    for value in image.reassignments():
        moving = value.reassignment
        assert moving is not None
        rows.append((
            value.topic, str(value.partition), moving.step, _ids(value.replicas),
            _ids(moving.target_replicas), _ids(moving.adding_replicas) or "-",
            _ids(moving.removing_replicas) or "-", _ids(value.isr),
        ))  # fmt: skip
    return table(rows) if len(rows) > 1 else ["No partition reassignments in progress."]
