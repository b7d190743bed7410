"""Topic deletion (Kafka's ``TopicDeletionManager``).

The topic is queued (``deleting=True``), its partitions go OFFLINE with no leader and
its replicas to ReplicaDeletionStarted. On the timer tick that follows
(``("delete-topic", name)``, ``topic_deletion_delay_ms`` later) every partition is
tombstoned, then the topic. Node agents follow the log, so they see the replicas stop.
A new controller resumes queued deletions.
"""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import PartitionState, PartitionValue, TopicValue
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import DeleteTopic
from kafkacoord.coordinator.runtime.timers import Timers

from .batch import Batch
from .config import ControllerConfig
from .partition_change import NO_LEADER, Election, partition_change
from .records import topic_value
from .states import ReplicaState, ReplicaStateMachine

__all__ = ["DELETE_TOPIC_TIMER", "TopicDeleter", "delete_topic_timer"]

DELETE_TOPIC_TIMER: Final = "delete-topic"

_DELETION: Final = (
    ReplicaState.DELETION_SUCCESSFUL,
    ReplicaState.NON_EXISTENT,
)


def delete_topic_timer(name: str) -> tuple[str, str]:
    return (DELETE_TOPIC_TIMER, name)


def _offline(batch: Batch, current: PartitionValue) -> PartitionValue:
    """The partition of a topic being deleted: OFFLINE, leaderless, not moving."""
    change = partition_change(batch, current).set_leader(NO_LEADER, Election.OFFLINE)
    return change.set_state(PartitionState.OFFLINE).set_reassignment(None).put()


class TopicDeleter:
    """Queues deletions, finishes them on their timer, and resumes them after a failover."""

    def __init__(
        self, config: ControllerConfig, replica_states: ReplicaStateMachine, timers: Timers
    ) -> None:
        self.config = config
        self.replica_states = replica_states
        self.timers = timers

    def delete(self, batch: Batch, body: DeleteTopic) -> None:
        if self.config.internal_topic(body.name) is not None:
            raise ProtocolError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"internal topic {body.name!r} cannot be deleted"
            )
        topic = batch.topic(body.name)
        if topic is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {body.name!r}"
            )
        if topic.deleting:
            return  # already queued
        batch.put_topic(topic_value(topic, deleting=True))
        live = batch.live()
        for p in self._partition_ids(batch, topic):
            current = batch.partition(body.name, p)
            if current is None:
                continue
            _offline(batch, current)
            self._stop_replicas(batch, current, live)
        self.timers.schedule(
            delete_topic_timer(body.name), batch.now_ms + self.config.topic_deletion_delay_ms
        )

    def _stop_replicas(self, batch: Batch, current: PartitionValue, live: frozenset[int]) -> None:
        key = (current.topic, current.partition)
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED):
            self.replica_states.transition(*key, current.replicas, state, value=current, live=live)

    @staticmethod
    def _partition_ids(batch: Batch, topic: TopicValue) -> list[int]:
        return sorted(set(range(topic.num_partitions)) | set(batch.image.partition_ids(topic.name)))

    def finish(self, batch: Batch, name: str) -> None:
        """The deletion timer: tombstone every partition, then the topic."""
        topic = batch.topic(name)
        if topic is None or not topic.deleting:
            return
        live = batch.live()
        for p in self._partition_ids(batch, topic):
            current = batch.partition(name, p)
            if current is None:
                continue
            if current.state is not PartitionState.OFFLINE:
                current = _offline(batch, current)
            for state in _DELETION:
                self.replica_states.transition(
                    name, p, current.replicas, state, value=current, live=live
                )
            batch.delete_partition(name, p)
        batch.delete_topic(name)

    def resume(self, batch: Batch) -> None:
        """After a failover: restore the replicas' deletion state and finish on the next tick."""
        live = batch.live()
        for name in batch.image.deleting_topics():
            topic = batch.topic(name)
            assert topic is not None
            for p in self._partition_ids(batch, topic):
                current = batch.partition(name, p)
                if current is not None:
                    self._stop_replicas(batch, current, live)
            self.timers.schedule(delete_topic_timer(name), batch.now_ms)
