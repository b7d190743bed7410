"""What a request gets when it reaches the processor before (or after) its host is
attached: a host that has not stopped is loading or about to attach, so the answer is
retriable (no broker, no thread: the host is never started, its processor never runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.driven import DrivenHost
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.processor import run_turn
from kafkacoord.coordinator.runtime.shard import Reply, Request, RequestRef
from kafkacoord.coordinator.runtime.turn import GroupCommits
from kafkacoord.storage.fold import offsets_policy


class Replies:
    def __init__(self) -> None:
        self.sent: list[Reply] = []

    def send(self, replies: Sequence[Reply]) -> None:
        self.sent.extend(replies)


class Idle:
    """A processor that is never run: its turns are the test's own ``run_turn``."""

    def __init__(self, replies: Replies) -> None:
        self.replies = replies

    def put(self, host: DrivenHost, event: object) -> None:
        raise AssertionError("nothing is queued for a host that was never started")

    def put_many(self, events: Sequence[tuple[DrivenHost, object]]) -> None:
        raise AssertionError("nothing is queued for a host that was never started")

    def on_its_thread(self) -> bool:
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        pass


def _host(state: HostState) -> tuple[ShardHost, Replies]:
    replies = Replies()
    unused = cast(Any, None)
    parts = HostParts(unused, "identity", offsets_policy(60_000), unused, unused, unused, replies)
    host = ShardHost("offsets-0", parts, processor=Idle(replies))
    host.state = state
    return host, replies


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        # Loaded, ACTIVE, and its ATTACH not yet through: the race this guards.
        (HostState.ACTIVE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        (HostState.LOADING, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        (HostState.STOPPED, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_a_request_for_a_host_not_attached_is_answered_by_its_state(
    state: HostState, expected: ErrorCode
) -> None:
    host, replies = _host(state)
    request = Request(RequestRef("client", 7), "OffsetCommit", cast(Any, None))
    run_turn({}, [(host, request)], GroupCommits(lambda waiters: None))
    assert [(r.to.correlation_id, r.error) for r in replies.sent] == [(7, expected)]
