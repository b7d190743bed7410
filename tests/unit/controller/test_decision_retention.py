"""Decision records past ``decision_retention_ms`` are tombstoned on a timer, a few at a
time, and the image forgets them; younger ones stay."""

from __future__ import annotations

import pytest

from kafkacoord.codecs.models import DecisionKey
from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.controller.decision_retention import (
    RETENTION_INTERVAL_MS,
    expire_decisions,
)
from kafkacoord.coordinator.protocol import controller_api as api

from .support import Cluster, quiet_config


def test_decisions_past_their_retention_are_tombstoned_and_forgotten() -> None:
    c = Cluster(quiet_config(decision_retention_ms=RETENTION_INTERVAL_MS))
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    old = dict(c.shard.image.decisions)
    assert old  # the registrations, heartbeats and the creation
    c.now += RETENTION_INTERVAL_MS // 2
    c.ok(api.FenceNode(node_id=1))
    young = set(c.shard.image.decisions) - set(old)
    assert young
    c.tick(RETENTION_INTERVAL_MS // 2 + 1)  # the timer's first run: the old ones expire
    tombstones = [r.key for r in c.log if isinstance(r.key, DecisionKey) and r.value is None]
    assert {(k.controller_epoch, k.sequence) for k in tombstones} == set(old)
    assert set(c.shard.image.decisions) == young
    c.check()


def test_a_run_tombstones_at_most_its_limit_oldest_first() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    image = c.shard.image
    decided = sorted(image.decisions)
    batch = Batch(image, c.shard.epoch, c.now + 10**9)
    assert expire_decisions(batch, retention_ms=1, limit=2)  # more left
    assert [r.key for r in batch.records] == [DecisionKey(*d) for d in decided[:2]]
    assert all(r.value is None for r in batch.records)
    young = Batch(image, c.shard.epoch, c.now)
    assert not expire_decisions(young, retention_ms=10**9) and young.records == []


def test_the_server_setting_reaches_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkacoord.server.settings import Settings

    assert Settings().controller_config().decision_retention_ms == 7 * 24 * 3600 * 1000
    monkeypatch.setenv("KAFKACOORD_DECISION_RETENTION_MS", "0")
    assert Settings().controller_config().decision_retention_ms == 0
