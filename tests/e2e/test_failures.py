"""The failure scenarios of tests/failures against a broker container.

The scenarios are the ones tests/integration/test_failures.py runs on the embedded
broker; each runs under a topic prefix of its own, so they share the session's broker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failures.bad_requests import FUZZ_FRAMES, GARBAGE, run_bad_requests
from tests.failures.broker import BrokerControl
from tests.failures.broker_loss import check_broker_loss_outcome, run_broker_loss_scenario
from tests.failures.kill_storm import run_kill_storm
from tests.failures.poison import check_poison_outcome, run_poison_scenario
from tests.failures.reassignment import run_reassignment_failover
from tests.failures.zombies import run_controller_zombie, run_shard_zombie

# Enough that each daemon is killed several times (the embedded broker's storm takes 6).
KILLS = 12


def test_kill_storm(container_broker: BrokerControl, tmp_path: Path) -> None:
    figures = run_kill_storm(container_broker, tmp_path, kills=KILLS)
    assert figures.kills_survived == KILLS


def test_controller_zombie(container_broker: BrokerControl, tmp_path: Path) -> None:
    figures = run_controller_zombie(container_broker, tmp_path)
    # Its node-session timers were overdue when it woke up. Either it tried to write and
    # the broker fenced it, or its lost lease stopped it before any write; then nothing
    # of it may have reached the log as committed (stale) records.
    assert figures.fenced_appends >= 1 or figures.zombie_writes_rejected == 0, figures


def test_shard_zombie(container_broker: BrokerControl, tmp_path: Path) -> None:
    figures = run_shard_zombie(container_broker, tmp_path)
    assert figures.fenced_appends >= 1


def test_bad_requests(container_broker: BrokerControl, tmp_path: Path) -> None:
    figures = run_bad_requests(container_broker, tmp_path)
    assert figures.bad_frames_closed == len(GARBAGE)
    assert figures.fuzz_frames_closed == FUZZ_FRAMES


def test_reassignment_across_controller_failover(
    container_broker: BrokerControl, tmp_path: Path
) -> None:
    figures = run_reassignment_failover(container_broker, tmp_path)
    assert figures.partitions_reassigned == 3


def test_poison_records(restartable_broker: BrokerControl, tmp_path: Path) -> None:
    check_poison_outcome(run_poison_scenario(restartable_broker, tmp_path))


def test_broker_loss(restartable_broker: BrokerControl, tmp_path: Path) -> None:
    if not restartable_broker.loses_data_on_restart:
        # A broker that keeps its disk: the scenario is the one that lost it.
        forget = getattr(restartable_broker, "forget_on_restart", None)
        if forget is None:
            pytest.skip(f"{restartable_broker.kind} keeps its data across a restart")
        forget()
    check_broker_loss_outcome(run_broker_loss_scenario(restartable_broker, tmp_path))
