"""``python -m tests.failures.fault_daemon daemon``: the real daemon, with faults a test
can arm while it runs.

Each fault is a code path of the shard runtime made to throw: a group handler, a record
that cannot be encoded, an append, a group timer, an internal event, a group shard's
cache write, a controller timer and the controller's cache write. A test arms one by
creating a file of its name in ``KAFKACOORD_TEST_FAULTS`` (a directory); the patched
code removes the file as it throws, so each arming throws once. Nothing else changes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.groups import offset_manager
from kafkacoord.coordinator.groups.offset_manager import OffsetManager
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.runtime.epoch_writer import LeaderEpochWriter
from kafkacoord.storage.cache import ShardStore
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.topics import InternalTopics

from .patching import require_sources

FAULTS = (
    "handler", "encode", "append", "group-timer", "group-event", "group-cache",
    "controller-timer", "controller-cache",
)  # fmt: skip
_DIR = Path(os.environ.get("KAFKACOORD_TEST_FAULTS", "/nonexistent"))


def armed(name: str) -> bool:
    """True once per arming: the first caller takes the file away."""
    try:
        (_DIR / name).unlink()
    except FileNotFoundError:
        return False
    return True


def _throwing(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def patched(*args: Any, **kwargs: Any) -> Any:
        if armed(name):
            raise RuntimeError(f"injected {name} fault")
        return original(*args, **kwargs)

    return patched


def _cache_write_throwing(original: Callable[..., Any]) -> Callable[..., Any]:
    """A shard's cache write in a processor turn (every live write, the controller's
    and the group shards'): it throws as ``controller-cache`` or ``group-cache``."""
    metadata = InternalTopics(prefix=os.environ.get("KAFKACOORD_TOPIC_PREFIX", "__kc_")).metadata

    def patched(store: ShardStore, *args: Any, **kwargs: Any) -> Any:
        name = "controller-cache" if store.shard.topic == metadata else "group-cache"
        if armed(name):
            raise RuntimeError(f"injected {name} fault")
        return original(store, *args, **kwargs)

    return patched


def install() -> None:
    require_sources()
    OffsetManager.commit = _throwing("handler", OffsetManager.commit)  # type: ignore[method-assign]
    GroupShard._fire = _throwing("group-timer", GroupShard._fire)  # type: ignore[method-assign]
    GroupShard.on_topics = _throwing("group-event", GroupShard.on_topics)  # type: ignore[method-assign]
    ShardStore.stage = _cache_write_throwing(ShardStore.stage)  # type: ignore[method-assign]
    ControllerShard._fire_timer = _throwing("controller-timer", ControllerShard._fire_timer)  # type: ignore[method-assign]

    value = offset_manager.offset_commit_value

    def unencodable(offset: int, leader_epoch: int, *args: Any) -> Any:
        # A value the record's Avro int cannot hold, as a bug past the edge would make.
        return value(offset, 2**31 if armed("encode") else leader_epoch, *args)

    offset_manager.offset_commit_value = unencodable  # type: ignore[assignment]

    submit = LeaderEpochWriter.submit

    def failing_submit(self: LeaderEpochWriter, records: Any, done: Any) -> None:
        if armed("append"):
            done([], AppendError("injected append fault", retriable=True))
            return
        submit(self, records, done)

    LeaderEpochWriter.submit = failing_submit  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    from kafkacoord.cli.main import main

    sys.argv = ["kafkacoord", *sys.argv[1:]]
    main()
