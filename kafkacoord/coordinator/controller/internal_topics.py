"""The controller's own internal topics (``ControllerConfig.internal_topics``).

The group-coordinator shards are such a topic: its partitions map one to one onto the
offsets topic's, and its replicas are daemons. It is created once a node with the
topic's role is live, and replicated towards the configured factor, through ordinary
reassignments, as more such nodes come. See docs/architecture.md#group-shards.
"""

from __future__ import annotations

from kafkacoord.codecs.models import TopicValue, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import ProtocolError

from .batch import Batch
from .config import ControllerConfig, InternalTopicSpec
from .partition_change import put_new_partition
from .reassignments import ReassignmentManager
from .records import new_topic_value, topic_value
from .topic_creation import TopicCreator

__all__ = ["InternalTopics"]


class InternalTopics:
    """Creates the internal topics and grows their replication as their nodes come."""

    def __init__(
        self,
        config: ControllerConfig,
        creator: TopicCreator,
        reassignments: ReassignmentManager,
    ) -> None:
        self.config = config
        self.creator = creator
        self.reassignments = reassignments

    def ensure(self, batch: Batch) -> None:
        """Create the internal topics that can be, and raise their replication as nodes with
        their role come."""
        with batch.because(Trigger(TriggerKind.INTERNAL_TOPICS)):
            self._ensure(batch)

    def _ensure(self, batch: Batch) -> None:
        for spec in self.config.internal_topics:
            nodes = [
                n for n in sorted(batch.live())
                if spec.role in batch.node(n).roles  # type: ignore[union-attr]
            ]  # fmt: skip
            if not nodes:
                continue
            topic = batch.topic(spec.name)
            if topic is None:
                self._create(batch, spec, nodes)
            elif not topic.deleting:
                self._grow(batch, spec, topic, nodes)

    def _create(self, batch: Batch, spec: InternalTopicSpec, nodes: list[int]) -> None:
        replication_factor = min(spec.replication_factor, len(nodes))
        try:
            assignment = self.creator.place(
                batch, nodes, spec.partitions, replication_factor, rack_aware=True
            )
        except ProtocolError:
            # Mixed racks among the role's nodes: place without racks rather than not at all.
            assignment = self.creator.place(
                batch, nodes, spec.partitions, replication_factor, rack_aware=False
            )
        batch.put_topic(
            new_topic_value(spec.name, self.creator.new_topic_id(), spec.partitions,
                            replication_factor, created_ms=batch.now_ms,
                            configs=dict(spec.configs))
        )  # fmt: skip
        for p in range(spec.partitions):
            put_new_partition(batch, spec.name, p, assignment[p])

    def _grow(
        self, batch: Batch, spec: InternalTopicSpec, topic: TopicValue, nodes: list[int]
    ) -> None:
        wanted = min(spec.replication_factor, len(nodes))
        values = [
            v
            for v in (batch.partition(spec.name, p) for p in range(topic.num_partitions))
            if v is not None
        ]
        load = dict.fromkeys(nodes, 0)
        for value in values:
            for r in value.replicas:
                if r in load:
                    load[r] += 1
        if wanted > topic.replication_factor:
            batch.put_topic(topic_value(topic, replication_factor=wanted))
        for value in values:
            if value.reassignment is not None or len(value.replicas) >= wanted:
                continue
            target = list(value.replicas)
            while len(target) < wanted:
                # The least loaded node with the role that holds no replica yet.
                extra = min((n for n in nodes if n not in target), key=lambda n: (load[n], n))
                load[extra] += 1
                target.append(extra)
            self.reassignments.alter_one(batch, spec.name, value.partition, target)
