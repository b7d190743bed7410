"""A storm of acknowledged writes against a daemon that gets killed under it, and the check
that every acknowledged write survived: shared by the kill -9 tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.storage.topics import InternalTopics

from .cluster import wait_until

GROUPS = [f"storm-{i}" for i in range(8)]


@dataclass
class Acknowledged:
    """What the daemon answered with success: it must survive every kill."""

    offsets: dict[str, int] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)
    commits: int = 0
    """Acknowledged commits in all."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def storm(
    bootstrap: str,
    topics: InternalTopics,
    node: int,
    acked: Acknowledged,
    stop: threading.Event,
    round_: int,
) -> None:
    """Commits and topic creations until the daemon dies under them."""
    shards = topics.offsets_partitions
    with (
        GroupAdmin(
            bootstrap, topic_prefix=topics.prefix, offsets_partitions=shards, timeout_s=5
        ) as groups,
        ControllerAdmin(bootstrap, topics, timeout_s=5) as admin,
    ):
        step = 0
        while not stop.is_set() and step < 10_000:
            step += 1
            group = GROUPS[step % len(GROUPS)]
            offset = round_ * 100_000 + step
            try:
                errors = groups.reset_offsets(group, {("orders", 0): offset})
                if errors.get(("orders", 0)) is ErrorCode.NONE:
                    with acked.lock:
                        acked.offsets[group] = offset
                        acked.commits += 1
                if step % 25 == 0:
                    name = f"t-{round_}-{step}"
                    admin.create_topic(name, replica_assignment={0: [node]})
                    with acked.lock:
                        acked.topics.add(name)
            except (RequestError, TimeoutError, OSError):
                if stop.is_set():
                    return
                time.sleep(0.05)


def check(bootstrap: str, topics: InternalTopics, node: int, acked: Acknowledged) -> None:

    def registered() -> MetadataImage | None:
        image = read_metadata(bootstrap, topics.metadata)
        return image if node in image.nodes else None

    image = wait_until(registered, timeout_s=60, what="the node registration")
    missing = sorted(t for t in acked.topics if image.topic(t) is None)
    assert missing == [], f"acknowledged topics lost: {missing}"
    with GroupAdmin(
        bootstrap,
        topic_prefix=topics.prefix,
        offsets_partitions=topics.offsets_partitions,
        timeout_s=30,
    ) as groups:
        for group, offset in acked.offsets.items():
            committed = groups.committed(group).get(("orders", 0))
            # A later commit may have been written but not answered: never less.
            assert committed is not None and committed.offset >= offset, (group, offset)
