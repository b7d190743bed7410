"""The cluster as the controller last decided it: ``__kc_metadata`` tailed into an image.

For services built on kafkacoord: where each partition's leader is, the endpoints each
node registered (``NodeAgent(endpoints=...)``), and topic settings, read without a
request to any daemon. Reads lag the log by one background poll, as every route does.
"""

from __future__ import annotations

import threading

from kafkacoord.codecs.models import NodeValue, PartitionValue, TopicValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.topics import InternalTopics

from .follower import MetadataFollower


class ClusterView:
    """A thread-safe, read-only view of the cluster's metadata, kept current in the
    background until closed."""

    def __init__(
        self, bootstrap: str, *, topic_prefix: str = "__kc_", client_id: str = "kafkacoord-view"
    ) -> None:
        self._image = MetadataImage()
        self._lock = threading.Lock()
        metadata = InternalTopics(prefix=topic_prefix).metadata
        self._tail = MetadataFollower(bootstrap, metadata, self._replay, client_id=client_id)

    def _replay(self, record: Record, _offset: int) -> None:
        with self._lock:
            self._image.replay(record)

    def wait_ready(self, timeout_s: float = 30.0) -> ClusterView:
        """Returns once the log has been read to its end; TimeoutError otherwise."""
        if not self._tail.wait_caught_up(timeout_s):
            raise TimeoutError(f"the metadata log was not read to its end in {timeout_s}s")
        return self

    def topic(self, name: str) -> TopicValue | None:
        with self._lock:
            return self._image.topic(name)

    def partition(self, topic: str, partition: int) -> PartitionValue | None:
        with self._lock:
            return self._image.partition(topic, partition)

    def node(self, node_id: int) -> NodeValue | None:
        with self._lock:
            return self._image.node(node_id)

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's ``min.insync.replicas`` (1 unless the topic sets it)."""
        with self._lock:
            return self._image.min_insync_replicas(topic)

    def endpoint(self, node_id: int, name: str) -> str | None:
        """The address ``node_id`` registered under ``name``, if it is registered."""
        node = self.node(node_id)
        return None if node is None else node.endpoints.get(name)

    def leader_endpoint(self, topic: str, partition: int, name: str) -> str | None:
        """The endpoint ``name`` of the partition's leader; None while it has none."""
        state = self.partition(topic, partition)
        return None if state is None or state.leader < 0 else self.endpoint(state.leader, name)

    def close(self) -> None:
        self._tail.close()

    def __enter__(self) -> ClusterView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
