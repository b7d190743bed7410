"""Broker loss: the embedded memory:// broker restarts empty; daemons rebuild and serve anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failures.broker import EmbeddedBrokerControl
from tests.failures.broker_loss import check_broker_loss_outcome, run_broker_loss_scenario

pytestmark = pytest.mark.integration


def test_daemons_rebuild_after_the_broker_loses_everything(
    private_broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_broker_loss_scenario(private_broker, tmp_path)
    check_broker_loss_outcome(figures)
