"""Poison records in both internal topics: daemons keep serving; strict mode stops them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failures.broker import EmbeddedBrokerControl
from tests.failures.poison import check_poison_outcome, run_poison_scenario

pytestmark = pytest.mark.integration


def test_poison_is_counted_logged_and_skipped_and_fatal_in_strict_mode(
    private_broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_poison_scenario(private_broker, tmp_path)
    check_poison_outcome(figures)
