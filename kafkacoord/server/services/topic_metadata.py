"""The broker's topics, as KIP-848 consumer groups subscribe to them.

Kafka's group coordinator learns topic changes from the metadata image; kafkacoord's
daemon asks the broker instead: every ``interval_s`` it lists the topics (partition
counts), and hands a changed picture to every group shard it leads. Racks come from
DescribeCluster, asked again only when the set of brokers changes or every
``racks_interval_s``: they change far more rarely than topics. The daemon's own
internal topics are left out, as Kafka hides its internal topics from subscriptions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from kafkacoord.codecs.models import PartitionRacks, SubscribedTopic
from kafkacoord.threads import spawn

log = structlog.get_logger(__name__)

__all__ = ["TopicWatcher", "topics_from_metadata"]

TopicsImage = dict[str, SubscribedTopic]


def topics_from_metadata(
    metadata: Any, racks: Mapping[int, str | None], hidden: Callable[[str], bool]
) -> TopicsImage:
    """Subscribable topics from a ``list_topics`` answer; racks where brokers declare them."""
    image: TopicsImage = {}
    for name, topic in metadata.topics.items():
        if hidden(name) or topic.error is not None:
            continue
        partition_racks = []
        for pid, partition in sorted(topic.partitions.items()):
            found = sorted({r for b in partition.replicas if (r := racks.get(b))})
            if found:
                partition_racks.append(PartitionRacks(pid, tuple(found)))
        image[name] = SubscribedTopic(name, len(topic.partitions), tuple(partition_racks))
    return image


class TopicWatcher:
    """Polls the broker's topic list and calls ``on_change`` with each new picture."""

    def __init__(
        self,
        admin: Any,
        *,
        hidden: Callable[[str], bool],
        on_change: Callable[[TopicsImage], None],
        interval_s: float = 2.0,
        timeout_s: float = 5.0,
        racks_interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin = admin
        self._racks_interval_s = racks_interval_s
        self._clock = clock
        # (broker ids, when read, racks): the last DescribeCluster answer.
        self._rack_cache: tuple[frozenset[int], float, dict[int, str | None]] | None = None
        self._hidden = hidden
        self._on_change = on_change
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._closing = threading.Event()
        self._thread = spawn("topic-metadata", self._run, start=False)
        self.image: TopicsImage | None = None

    def start(self) -> TopicWatcher:
        # One read before any shard loads, so a shard never starts from "no topics".
        self.refresh()
        self._thread.start()
        return self

    def refresh(self) -> bool:
        """Read the broker once; whether the picture changed."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
            racks = self._racks(frozenset(metadata.brokers))
        except Exception as exc:  # a missing broker: keep the last picture, try again
            log.warning("reading topic metadata failed", error=str(exc))
            return False
        image = topics_from_metadata(metadata, racks, self._hidden)
        if image == self.image:
            return False
        self.image = image
        self._on_change(image)
        return True

    def _racks(self, brokers: frozenset[int]) -> dict[int, str | None]:
        now = self._clock()
        cached = self._rack_cache
        if cached is not None and cached[0] == brokers and now - cached[1] < self._racks_interval_s:
            return cached[2]
        try:
            cluster = self._admin.describe_cluster(request_timeout=self._timeout_s).result()
        except Exception:
            return {}  # racks are a hint; some brokers do not describe their cluster
        racks = {node.id: node.rack for node in cluster.nodes}
        self._rack_cache = (brokers, now, racks)
        return racks

    def _run(self) -> None:
        while not self._closing.wait(self._interval_s):
            self.refresh()

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._timeout_s + 1)
