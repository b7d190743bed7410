"""Broker loss: the embedded memory:// broker restarts empty; daemons rebuild and serve anew."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.failures.broker import EmbeddedBrokerControl
from tests.failures.broker_loss import DAEMONS, SHARDS, run_broker_loss_scenario

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBrokerControl]:
    control = EmbeddedBrokerControl(tmp_path).start()
    try:
        yield control
    finally:
        control.stop()


def test_daemons_rebuild_after_the_broker_loses_everything(
    broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_broker_loss_scenario(broker, tmp_path)

    # Before the loss: real state to lose.
    assert figures.committed_before == {("t", 0): 5, ("t", 1): 6}
    assert figures.topic_before
    assert figures.epochs_before and figures.epochs_before[0] == 0

    # Every daemon noticed and rebuilt, once.
    assert figures.rebuild_events == {node: 1 for node in DAEMONS}
    assert figures.rebuilt_events == {node: 1 for node in DAEMONS}

    # Serving again, from the new log only.
    assert sorted(figures.round_trips_after.values(), key=str) == [
        {("t", shard): 100 + shard} for shard in range(SHARDS)
    ]
    assert figures.old_group_after == {}
    assert not figures.topic_after
    assert set(DAEMONS) <= set(figures.live_nodes_after)
    # The controller counted its epoch again from the empty log, not on from the old one.
    assert figures.epochs_after and figures.epochs_after[0] == 0
