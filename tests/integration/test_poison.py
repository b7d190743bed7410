"""Poison records in both internal topics: daemons keep serving; strict mode stops them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.failures.broker import EmbeddedBrokerControl
from tests.failures.poison import KINDS, SHARDS, run_poison_scenario

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBrokerControl]:
    control = EmbeddedBrokerControl(tmp_path).start()
    try:
        yield control
    finally:
        control.stop()


def test_poison_is_counted_logged_and_skipped_and_fatal_in_strict_mode(
    broker: EmbeddedBrokerControl, tmp_path: Path
) -> None:
    figures = run_poison_scenario(broker, tmp_path)

    # Two rounds (before start, while running) of every kind into every partition.
    assert len(figures.injected) == 1 + SHARDS
    assert all(len(offsets) == 2 * len(KINDS) for offsets in figures.injected.values())
    # The skip lines name exactly the injected offsets, and nothing else.
    assert figures.logged == {tp: set(offsets) for tp, offsets in figures.injected.items()}
    injected = sum(len(offsets) for offsets in figures.injected.values())
    assert figures.skipped >= injected
    # The first daemon's own loads met the first round in both topics.
    assert figures.ready_poison_skipped >= (1 + SHARDS) * len(KINDS)

    # Still serving: the good records around the poison survived, and new requests work.
    assert figures.kept_offsets == {("t", 0): 10, ("t", 1): 11}
    assert figures.round_trip == {("t", 0): 42, ("t", 3): 7}
    assert figures.created_topic_id

    assert figures.strict_exit_code != 0
    assert f"poison record at {figures.first_poison}" in figures.strict_output
    assert "Traceback" not in figures.strict_output
