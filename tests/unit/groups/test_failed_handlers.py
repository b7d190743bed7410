"""A membership handler that fails partway leaves its group and timers as they were,
and the shard serves on: the same join then succeeds as on a shard that never failed."""

from __future__ import annotations

from typing import Any

import pytest

from kafkacoord.coordinator.groups.scheduling import ShardTimers
from kafkacoord.coordinator.protocol import ErrorCode

from .groupdriver import Driver, join_body


def state(d: Driver, group: str) -> tuple[Any, ...]:
    return d.shard.describe_group(group), d.shard._timers.snapshot(), len(d.log)


def test_a_join_that_fails_partway_leaves_no_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    failed, clean = Driver(), Driver()
    for d in (failed, clean):
        d.form_group("g", 2)
    newcomer = [d.new_member_id("g") for d in (failed, clean)]
    assert newcomer[0] == newcomer[1]
    before = state(failed, "g")
    original, calls = ShardTimers.schedule, [0]

    def flaky(self: ShardTimers, key: object, deadline_ms: int) -> None:
        calls[0] += 1
        raise RuntimeError("injected failure")

    with monkeypatch.context() as patch:
        patch.setattr(ShardTimers, "schedule", flaky)
        with pytest.raises(RuntimeError):
            failed.request(join_body("g", newcomer[0]))
    assert calls[0] >= 1, "the failure was never reached"
    assert state(failed, "g") == before
    assert ShardTimers.schedule is original
    # Served on: the same join parks both shards' groups in the same rebalance.
    refs = [d.request(join_body("g", newcomer[0])) for d in (failed, clean)]
    assert failed.reply(refs[0]) == clean.reply(refs[1])
    assert state(failed, "g") == state(clean, "g")
    assert failed.shard.describe_group("g").state is not None


def test_a_first_join_that_fails_leaves_no_group(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Driver()
    with monkeypatch.context() as patch:
        patch.setattr(ShardTimers, "schedule", lambda *a: (_ for _ in ()).throw(RuntimeError()))
        with pytest.raises(RuntimeError):
            d.request(join_body("fresh"))
    assert d.shard.group("fresh") is None
    reply = d.call(join_body("fresh"))
    assert reply.error is ErrorCode.MEMBER_ID_REQUIRED
