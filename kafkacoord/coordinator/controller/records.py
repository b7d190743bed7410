"""The records of ``__kc_metadata``, built in one place.

Each record is the whole state of its key, because compaction keeps only a key's last
record; a tombstone (``None``) deletes the key. Every decision carries the epoch of the
controller that wrote it, so replay can fence a deposed controller
(docs/architecture.md#fencing). Kafka's KRaft controller builds the same records in
``ReplicationControlManager`` and ``ClusterControlManager``.

The values built here (and partition values, built by :mod:`.partition_change`) carry
:data:`EPOCH_FROM_BATCH`: the :class:`~.batch.Batch` they are put in stamps its own epoch
on them, and refuses a value that carries another.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kafkacoord.codecs.fencing import NO_EPOCH
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionValue,
    RebalanceKey,
    RebalanceMove,
    RebalanceState,
    RebalanceValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.runtime.shard import Record

__all__ = [
    "EPOCH_FROM_BATCH",
    "controller_record",
    "new_node_value",
    "new_topic_value",
    "node_record",
    "node_value",
    "partition_record",
    "partition_tombstone",
    "rebalance_record",
    "rebalance_value",
    "reregistered_node_value",
    "topic_record",
    "topic_tombstone",
    "topic_value",
]

EPOCH_FROM_BATCH: Final = NO_EPOCH
"""The controller epoch of a value not yet put in a batch. Should one ever reach the log,
it is older than every controller's epoch, and the controller epoch fence drops it."""


def controller_record(
    epoch: int, node_id: int, incarnation: str, now_ms: int, endpoint: str | None
) -> Record:
    """A controller's claim of ``epoch``: the first record it writes once loaded."""
    return Record(ControllerKey(), ControllerValue(epoch, node_id, incarnation, now_ms, endpoint))


def node_record(value: NodeValue) -> Record:
    return Record(NodeKey(value.node_id), value)


def new_node_value(
    node_id: int,
    incarnation: str,
    node_epoch: int,
    registered_ms: int,
    *,
    rack: str | None,
    endpoints: dict[str, str],
    roles: tuple[str, ...],
) -> NodeValue:
    """A node's new incarnation, registered fenced (its first heartbeat unfences it)."""
    return NodeValue(
        node_id=node_id,
        incarnation=incarnation,
        node_epoch=node_epoch,
        fenced=True,
        registered_ms=registered_ms,
        controller_epoch=EPOCH_FROM_BATCH,
        rack=rack,
        endpoints=endpoints,
        shutting_down=False,
        roles=roles,
    )


def node_value(
    old: NodeValue, *, fenced: bool | None = None, shutting_down: bool | None = None
) -> NodeValue:
    """``old`` with a new fencing or shutdown state."""
    # Direct constructor, not dataclasses.replace: a failover fences many nodes at once.
    return NodeValue(
        node_id=old.node_id,
        incarnation=old.incarnation,
        node_epoch=old.node_epoch,
        fenced=old.fenced if fenced is None else fenced,
        registered_ms=old.registered_ms,
        controller_epoch=EPOCH_FROM_BATCH,
        rack=old.rack,
        endpoints=old.endpoints,
        shutting_down=old.shutting_down if shutting_down is None else shutting_down,
        roles=old.roles,
    )


def reregistered_node_value(
    old: NodeValue, *, rack: str | None, endpoints: dict[str, str], roles: tuple[str, ...]
) -> NodeValue:
    """``old`` registered again by the same incarnation, with a new rack, endpoints or roles."""
    return dataclasses.replace(old, controller_epoch=EPOCH_FROM_BATCH, rack=rack,
                               endpoints=endpoints, roles=roles)  # fmt: skip


def topic_record(value: TopicValue) -> Record:
    return Record(TopicKey(value.name), value)


def topic_tombstone(name: str) -> Record:
    return Record(TopicKey(name), None)


def new_topic_value(
    name: str,
    topic_id: str,
    num_partitions: int,
    replication_factor: int,
    *,
    created_ms: int,
    configs: dict[str, str],
) -> TopicValue:
    return TopicValue(
        name=name,
        topic_id=topic_id,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        created_ms=created_ms,
        controller_epoch=EPOCH_FROM_BATCH,
        configs=configs,
    )


def topic_value(
    old: TopicValue,
    *,
    num_partitions: int | None = None,
    replication_factor: int | None = None,
    deleting: bool | None = None,
    configs: dict[str, str] | None = None,
) -> TopicValue:
    """``old`` with the given fields changed."""
    return TopicValue(
        name=old.name,
        topic_id=old.topic_id,
        num_partitions=old.num_partitions if num_partitions is None else num_partitions,
        replication_factor=(
            old.replication_factor if replication_factor is None else replication_factor
        ),
        created_ms=old.created_ms,
        controller_epoch=EPOCH_FROM_BATCH,
        configs=old.configs if configs is None else configs,
        deleting=old.deleting if deleting is None else deleting,
    )


def partition_record(value: PartitionValue) -> Record:
    return Record(PartitionKey(value.topic, value.partition), value)


def partition_tombstone(topic: str, partition: int) -> Record:
    return Record(PartitionKey(topic, partition), None)


def rebalance_record(value: RebalanceValue) -> Record:
    return Record(RebalanceKey(), value)


def rebalance_value(
    old: RebalanceValue,
    state: RebalanceState,
    message: str,
    updated_ms: int,
    *,
    moves: tuple[RebalanceMove, ...] | None = None,
) -> RebalanceValue:
    """``old`` in a new state, with a new message (and, given, fewer moves)."""
    return dataclasses.replace(
        old, state=state, moves=old.moves if moves is None else moves, updated_ms=updated_ms,
        controller_epoch=EPOCH_FROM_BATCH, message=message,
    )  # fmt: skip
