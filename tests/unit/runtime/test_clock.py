"""The shards' steady clock: a wall-clock step moves neither deadlines nor timestamps."""

from __future__ import annotations

import inspect

import pytest

from kafkacoord.coordinator.runtime.clock import SteadyClock, steady_ms
from kafkacoord.coordinator.runtime.host import ShardHost


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_800_000_000.0
        self.monotonic = 500.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.monotonic += seconds


def test_it_starts_at_the_wall_and_follows_the_monotonic_clock() -> None:
    clocks = Clocks()
    clock = SteadyClock(lambda: clocks.wall, lambda: clocks.monotonic)
    assert clock.ms() == 1_800_000_000_000
    clocks.advance(2.5)
    assert clock.ms() == 1_800_000_002_500


def test_a_wall_step_either_way_does_not_move_it() -> None:
    clocks = Clocks()
    clock = SteadyClock(lambda: clocks.wall, lambda: clocks.monotonic)
    deadline = clock.ms() + 3_000  # a session three seconds out
    clocks.wall += 680  # NTP steps the wall forward ...
    clocks.advance(1)
    assert clock.ms() < deadline  # ... and the session has not expired
    clocks.wall -= 1_360  # ... then back, past where it began
    clocks.advance(1)
    assert clock.ms() < deadline
    clocks.advance(1.001)
    assert clock.ms() >= deadline  # it expires after its three seconds, not before or later


@pytest.mark.sources
def test_hosts_read_the_steady_clock_by_default() -> None:
    default = inspect.signature(ShardHost.__init__).parameters["clock_ms"].default
    assert default is steady_ms
    assert abs(steady_ms() - SteadyClock().ms()) < 1_000
