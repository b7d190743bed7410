"""Where requests go: the controller and each group shard's leader, from ``__kc_metadata``.

Clients need only the Kafka bootstrap. A route table tails the metadata log into a
:class:`MetadataImage` (the controller's own view, with its stale-epoch fence):

- the controller's endpoint is in the newest ``ControllerRecord``;
- group shard p is partition p of the logical topic ``<prefix>offsets``, whose leader
  is a daemon, and that node's registration names its endpoint.

Routes lag the log by one background poll. A daemon that no longer owns what it is
asked for answers NOT_COORDINATOR / NOT_CONTROLLER, and the caller waits here for
the metadata to move on.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from kafkacoord.codecs import RecordType
from kafkacoord.codecs.records import partition_key_prefix
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.topics import InternalTopics

from .follower import MetadataFollower

# The key of a daemon's listener in its node registration's endpoints.
LISTENER_ENDPOINT: Final = "kafkacoord"
# The target of controller requests; group shards are targets 0..N-1.
CONTROLLER: Final = -1


def describe(target: int) -> str:
    """Names a target for error messages."""
    return "the controller" if target == CONTROLLER else f"group shard {target}"


class Routes(Protocol):
    """Where the controller and each group shard's leader listen, as far as known."""

    @property
    def version(self) -> int:
        """Goes up whenever a route may have changed."""

    def wait_ready(self, timeout_s: float) -> bool: ...

    def wait_change(self, seen: int, timeout_s: float) -> int: ...

    def endpoint(self, target: int) -> str | None: ...

    def close(self) -> None: ...


class _Versioned:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.version = 0

    def _bump(self) -> None:
        with self._changed:
            self.version += 1
            self._changed.notify_all()

    def wait_change(self, seen: int, timeout_s: float) -> int:
        """Wait until the routes change after version ``seen``; returns the version now."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.version == seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return self.version


class StaticRoutes(_Versioned):
    """Routes given up front, for callers that know where the daemons listen."""

    def __init__(self, endpoints: Mapping[int, str] | None = None, default: str | None = None):
        super().__init__()
        self._endpoints = dict(endpoints or {})
        self._default = default

    def set(self, target: int, endpoint: str | None) -> None:
        with self._changed:
            if endpoint is None:
                self._endpoints.pop(target, None)
            else:
                self._endpoints[target] = endpoint
        self._bump()

    def wait_ready(self, timeout_s: float) -> bool:
        return True

    def endpoint(self, target: int) -> str | None:
        with self._changed:
            return self._endpoints.get(target, self._default)

    def close(self) -> None:
        pass


def route_keys(offsets_topic: str) -> Callable[[bytes], bool]:
    """The metadata records routes need: the controller, the nodes and the offsets
    topic's partitions (which node leads each shard). A client process then neither
    decodes nor keeps the rest of a cluster's partitions (a million, at scale). Unknown
    type tags pass, so the follower still reports them as poison."""
    shards = partition_key_prefix(offsets_topic)
    skipped = {RecordType.TOPIC, RecordType.REBALANCE, RecordType.DECISION}

    def wants(key: bytes) -> bool:
        if key[0] == RecordType.PARTITION:
            return key.startswith(shards)
        return key[0] not in skipped

    return wants


class RouteTable(_Versioned):
    """Routes learnt by tailing ``__kc_metadata`` into a :class:`MetadataImage`."""

    def __init__(self, bootstrap: str, topics: InternalTopics) -> None:
        super().__init__()
        self.topics = topics
        self._image = MetadataImage()
        self._follower = MetadataFollower(
            bootstrap, topics.metadata, self._on_record,
            client_id=f"kafkacoord-routes-{uuid.uuid4().hex[:8]}", on_caught_up=self._on_caught_up,
            wants=route_keys(topics.offsets),
        )  # fmt: skip

    def _on_record(self, record: Record, offset: int) -> None:
        with self._changed:
            self._image.replay(record)
            self.version += 1
            self._changed.notify_all()

    def _on_caught_up(self) -> None:
        self._bump()

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the log was read to its end: before that, routes may be history."""
        return self._follower.wait_caught_up(timeout_s)

    def endpoint(self, target: int) -> str | None:
        """The endpoint serving ``target`` (CONTROLLER or a group shard), if known."""
        with self._changed:
            image = self._image
            if target == CONTROLLER:
                controller = image.controller
                return None if controller is None else controller.endpoint
            state = image.partition(self.topics.offsets, target)
            if state is None or state.leader < 0:
                return None
            node = image.node(state.leader)
            return None if node is None else node.endpoints.get(LISTENER_ENDPOINT)

    def close(self) -> None:
        self._follower.close()
