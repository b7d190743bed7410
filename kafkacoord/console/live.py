"""The console's live copy of the cluster metadata, and what changed over time.

A :class:`LiveMetadata` tails ``<prefix>metadata`` into its own
:class:`~kafkacoord.coordinator.controller.image.MetadataImage` (the controller's view,
with its stale-epoch fence), so pages read memory, not the log. While it replays it
remembers leadership changes and finished reassignments in bounded rings: the
``/history`` and ``/reassignments`` pages. Where the log was compacted, history starts
at what survived.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kafkacoord.client.follower import MetadataFollower
from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record

T = TypeVar("T")

__all__ = ["FinishedReassignment", "LeaderChange", "LiveMetadata", "MetadataTracker"]


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """A partition got a new leader (or lost it: ``leader`` -1)."""

    at_ms: int
    topic: str
    partition: int
    previous: int
    leader: int
    leader_epoch: int
    election: str


@dataclass(frozen=True, slots=True)
class FinishedReassignment:
    """A partition's reassignment ended: completed (replicas are the target) or cancelled."""

    at_ms: int
    topic: str
    partition: int
    original: tuple[int, ...]
    target: tuple[int, ...]
    replicas: tuple[int, ...]
    started_ms: int

    @property
    def completed(self) -> bool:
        return self.replicas == self.target


class MetadataTracker:
    """The image plus its history rings; fed one record at a time, with no I/O."""

    def __init__(self, *, history: int = 5000) -> None:
        self.image = MetadataImage()
        self.leader_changes: deque[LeaderChange] = deque(maxlen=history)
        self.finished: deque[FinishedReassignment] = deque(maxlen=history)
        self.lock = threading.Lock()

    def replay(self, record: Record) -> None:
        value = record.value
        with self.lock:
            old = None
            if isinstance(value, PartitionValue):
                old = self.image.partition(value.topic, value.partition)
            if not self.image.replay(record) or not isinstance(value, PartitionValue):
                return
            previous = -1 if old is None else old.leader
            if value.leader != previous:
                self.leader_changes.append(
                    LeaderChange(value.updated_ms, value.topic, value.partition, previous,
                                 value.leader, value.leader_epoch, value.election or "unknown")
                )  # fmt: skip
            was = None if old is None else old.reassignment
            if was is not None and value.reassignment is None:
                self.finished.append(
                    FinishedReassignment(value.updated_ms, value.topic, value.partition,
                                         was.original_replicas, was.target_replicas,
                                         value.replicas, was.started_ms)
                )  # fmt: skip

    def read(self, view: Callable[[MetadataTracker], T]) -> T:
        """Run ``view`` while no record is replayed: it sees one consistent image."""
        with self.lock:
            return view(self)


class LiveMetadata(MetadataTracker):
    """A :class:`MetadataTracker` fed by a follower of the metadata topic."""

    def __init__(self, bootstrap: str, topic: str, *, client_id: str, history: int = 5000):
        super().__init__(history=history)
        self._follower = MetadataFollower(
            bootstrap, topic, lambda record, _: self.replay(record), client_id=client_id
        )

    def close(self) -> None:
        self._follower.close()
