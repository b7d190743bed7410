"""``python -m tests.nemesis.stale_daemon daemon``: a deliberately broken daemon that the
campaign's checker must catch.

When a group shard leaves this daemon (its leadership moved on), the daemon keeps a copy
of the shard's offsets and answers every later OffsetFetch for that shard (JSON or
binary) from the copy instead of NOT_COORDINATOR: a coordinator answering from memory
after losing its shard. A client whose routes still name this daemon then reads offsets
older than ones already acknowledged by the new leader, which the checker reports as
stale reads.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from kafkacoord.coordinator.groups.offset_manager import OffsetManager
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_fetch import BinaryOffsetFetch
from kafkacoord.coordinator.runtime.shard import Request, send_replies
from kafkacoord.server.services.groups import GroupService
from tests.failures.patching import require_sources

_GHOSTS: dict[int, OffsetManager] = {}


def install() -> None:
    require_sources()
    unloaded = GroupShard.on_unloaded

    def keep_a_copy(self: GroupShard) -> Any:
        ghost = copy.copy(self._offsets)
        ghost.store = copy.deepcopy(self._offsets.store)  # the shard's is cleared next
        _GHOSTS[self.partition] = ghost
        return unloaded(self)

    GroupShard.on_unloaded = keep_a_copy  # type: ignore[method-assign]

    dispatch = GroupService.dispatch

    def answer_from_memory(self: GroupService, requests: list[tuple[int, Request]]) -> None:
        rest = []
        for partition, request in requests:
            ghost = _GHOSTS.get(partition)
            if (
                ghost is not None
                and partition not in self.hosts
                and isinstance(request.body, api.OffsetFetch | BinaryOffsetFetch)
            ):
                send_replies(ghost.fetch(request.ref, request.body).replies)
            else:
                rest.append((partition, request))
        dispatch(self, rest)

    GroupService.dispatch = answer_from_memory  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    from kafkacoord.cli.main import main

    sys.argv = ["kafkacoord", *sys.argv[1:]]
    main()
