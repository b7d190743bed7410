"""A handler that fails partway leaves no trace: replica states, timers and the
placement rng are as before, nothing is written, and the same request then succeeds
exactly as it would have without the failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster


def soft_state(c: Cluster) -> tuple[Any, ...]:
    shard = c.shard
    return (shard.replica_states.explicit(), shard.timers.snapshot(), shard.rng.getstate(),
            len(c.log))  # fmt: skip


@contextmanager
def failing_write(monkeypatch: pytest.MonkeyPatch, method: str, after: int) -> Iterator[None]:
    """The batch's ``method`` raises on its call number ``after`` + 1: a bug partway through."""
    original = getattr(Batch, method)
    calls = [0]

    def flaky(self: Batch, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] > after:
            raise RuntimeError("injected failure")
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Batch, method, flaky)
        yield
    assert calls[0] > after, "the failure was never reached"


def three_nodes() -> Cluster:
    c = Cluster()
    c.add_nodes(range(1, 7))
    return c


def reassignment(replicas: list[int]) -> api.AlterReassignments:
    target = api.ReassignmentTarget(topic="t", partition=0, replicas=replicas)
    return api.AlterReassignments(reassignments=[target])


CASES: dict[str, tuple[Callable[[Cluster], None], Body, str, int]] = {
    # setup, request, the batch method that fails, how many calls succeed first
    "topic creation": (lambda c: None,
                       api.CreateTopic(name="t", num_partitions=6, replication_factor=3),
                       "put_partition", 3),
    "topic deletion": (lambda c: c.create("t", assignment={0: [1, 2, 3], 1: [2, 3, 4]}),
                       api.DeleteTopic(name="t"), "put_partition", 1),
    "a reassignment step": (lambda c: c.create("t", assignment={0: [1, 2, 3]}),
                            reassignment([4, 5, 6]), "put_partition", 0),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_an_injected_failure_leaves_no_trace(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    setup, body, method, after = CASES[case]
    failed, clean = three_nodes(), three_nodes()
    for c in (failed, clean):
        setup(c)
    before = soft_state(failed)
    with failing_write(monkeypatch, method, after):
        reply = failed.call(body)
    assert reply.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert not failed.last.records
    assert soft_state(failed) == before
    # The next request succeeds, and exactly as on a cluster that never failed.
    assert failed.call(body, retry=True).error is ErrorCode.NONE
    assert clean.call(body).error is ErrorCode.NONE
    assert failed.log == clean.log
    assert soft_state(failed) == soft_state(clean)
    failed.tick(60_000)
    clean.tick(60_000)
    assert failed.log == clean.log
