"""The records of ``__kc_metadata``, built in one place.

Each record is the whole state of its key, because compaction keeps only a key's last
record; a tombstone (``None``) deletes the key. Every decision carries the epoch of the
controller that wrote it, so replay can fence a deposed controller
(docs/architecture.md#fencing). Kafka's KRaft controller builds the same records in
``ReplicationControlManager`` and ``ClusterControlManager``.
"""

from __future__ import annotations

from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionValue,
    RebalanceKey,
    RebalanceValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.runtime.shard import Record

__all__ = [
    "controller_record",
    "node_record",
    "node_value",
    "partition_record",
    "partition_tombstone",
    "rebalance_record",
    "topic_record",
    "topic_tombstone",
    "topic_value",
]


def controller_record(
    epoch: int, node_id: int, incarnation: str, now_ms: int, endpoint: str | None
) -> Record:
    """A controller's claim of ``epoch``: the first record it writes once loaded."""
    return Record(ControllerKey(), ControllerValue(epoch, node_id, incarnation, now_ms, endpoint))


def node_record(value: NodeValue) -> Record:
    return Record(NodeKey(value.node_id), value)


def node_value(
    old: NodeValue,
    controller_epoch: int,
    *,
    fenced: bool | None = None,
    shutting_down: bool | None = None,
) -> NodeValue:
    """``old`` with a new fencing or shutdown state, stamped with the writer's epoch."""
    # Direct constructor, not dataclasses.replace: a failover fences many nodes at once.
    return NodeValue(
        node_id=old.node_id,
        incarnation=old.incarnation,
        node_epoch=old.node_epoch,
        fenced=old.fenced if fenced is None else fenced,
        registered_ms=old.registered_ms,
        controller_epoch=controller_epoch,
        rack=old.rack,
        endpoints=old.endpoints,
        shutting_down=old.shutting_down if shutting_down is None else shutting_down,
        roles=old.roles,
    )


def topic_record(value: TopicValue) -> Record:
    return Record(TopicKey(value.name), value)


def topic_tombstone(name: str) -> Record:
    return Record(TopicKey(name), None)


def topic_value(
    old: TopicValue,
    controller_epoch: int,
    *,
    num_partitions: int | None = None,
    replication_factor: int | None = None,
    deleting: bool | None = None,
    configs: dict[str, str] | None = None,
) -> TopicValue:
    """``old`` with the given fields changed, stamped with the writer's epoch."""
    return TopicValue(
        name=old.name,
        topic_id=old.topic_id,
        num_partitions=old.num_partitions if num_partitions is None else num_partitions,
        replication_factor=(
            old.replication_factor if replication_factor is None else replication_factor
        ),
        created_ms=old.created_ms,
        controller_epoch=controller_epoch,
        configs=old.configs if configs is None else configs,
        deleting=old.deleting if deleting is None else deleting,
    )


def partition_record(value: PartitionValue) -> Record:
    return Record(PartitionKey(value.topic, value.partition), value)


def partition_tombstone(topic: str, partition: int) -> Record:
    return Record(PartitionKey(topic, partition), None)


def rebalance_record(value: RebalanceValue) -> Record:
    return Record(RebalanceKey(), value)
