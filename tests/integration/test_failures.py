"""The failure scenarios of tests/failures against the embedded broker.

Each scenario gets a private embedded broker, so a failure in one cannot leak into
another (the scenarios also use topic prefixes of their own). The kill storm does
fewer kills than in the end-to-end run to keep this layer at a few minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failures.bad_requests import FUZZ_FRAMES, GARBAGE, run_bad_requests
from tests.failures.broker import EmbeddedBrokerControl
from tests.failures.kill_storm import run_kill_storm
from tests.failures.reassignment import run_reassignment_failover
from tests.failures.rebalance import LIMITS, run_rebalance_failover
from tests.failures.zombies import run_controller_zombie, run_shard_zombie

pytestmark = pytest.mark.integration

KILLS = 6


def test_kill_storm(private_broker: EmbeddedBrokerControl, tmp_path: Path) -> None:
    figures = run_kill_storm(private_broker, tmp_path, kills=KILLS)
    assert figures.kills_survived == KILLS
    assert figures.max_controller_epoch >= 1


def test_controller_zombie(private_broker: EmbeddedBrokerControl, tmp_path: Path) -> None:
    figures = run_controller_zombie(private_broker, tmp_path)
    # Its node-session timers were overdue when it woke up. Either it tried to write and
    # the broker fenced it, or its lost lease stopped it before any write; then nothing
    # of it may have reached the log as committed (stale) records.
    assert figures.fenced_appends >= 1 or figures.zombie_writes_rejected == 0, figures


def test_shard_zombie(private_broker: EmbeddedBrokerControl, tmp_path: Path) -> None:
    figures = run_shard_zombie(private_broker, tmp_path)
    assert figures.fenced_appends >= 1


def test_bad_requests(private_broker: EmbeddedBrokerControl, tmp_path: Path) -> None:
    figures = run_bad_requests(private_broker, tmp_path)
    assert figures.bad_frames_closed == len(GARBAGE)
    assert figures.fuzz_frames_closed == FUZZ_FRAMES


def test_reassignment_across_controller_failover(
    private_broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_reassignment_failover(private_broker, tmp_path)
    assert figures.in_flight_at_kill >= 1


def test_rebalance_across_controller_failover(
    private_broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_rebalance_failover(private_broker, tmp_path)
    assert 0 < figures.done_at_kill < figures.moves
    # The limits were reached (so they were what held the moves back), never exceeded.
    assert figures.max_in_flight_per_node == LIMITS.max_concurrent_moves_per_node
