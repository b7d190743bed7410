"""TimerRetries (a failed timer's backoff) and RestartBackoff (a stopped host's)."""

from __future__ import annotations

import pytest

from kafkacoord.coordinator.runtime.restarts import (
    FIRST_DELAY_S,
    HEALTHY_S,
    MAX_DELAY_S,
    RestartBackoff,
)
from kafkacoord.coordinator.runtime.timers import (
    RETRY_ATTEMPTS,
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
    TimerRetries,
)

# -- TimerRetries ---------------------------------------------------------------------------------


def test_the_defaults_are_100_ms_doubling_to_10_s_and_5_attempts() -> None:
    assert (RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, RETRY_ATTEMPTS) == (100, 10_000, 5)


def test_each_failure_in_a_row_doubles_the_backoff_then_the_key_is_dropped() -> None:
    retries = TimerRetries()
    now = 1_000_000
    delays = []
    for expected_failures in range(1, 5):
        retry_at = retries.failed("k", now)
        assert retry_at is not None
        delays.append(retry_at - now)
        assert retries.failures("k") == expected_failures
        now = retry_at
    assert delays == [100, 200, 400, 800]
    # The fifth failure in a row drops it, and forgets it.
    assert retries.failed("k", now) is None
    assert retries.failures("k") == 0
    # Forgotten: a later failure starts over from the first delay.
    assert retries.failed("k", now) == now + 100


def test_the_backoff_is_capped() -> None:
    retries = TimerRetries(backoff_ms=100, backoff_max_ms=10_000, attempts=20)
    delays = []
    for _ in range(19):
        retry_at = retries.failed("k", 0)
        assert retry_at is not None
        delays.append(retry_at)
    assert delays[:8] == [100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000]
    assert set(delays[7:]) == {10_000}
    assert retries.failed("k", 0) is None  # the twentieth


def test_a_success_clears_the_count() -> None:
    retries = TimerRetries()
    for _ in range(4):
        assert retries.failed("k", 0) is not None
    retries.succeeded("k")
    assert retries.failures("k") == 0
    # Starts over: four more failures are retried, not dropped.
    assert [retries.failed("k", 0) for _ in range(4)] == [100, 200, 400, 800]
    assert retries.failed("k", 0) is None


def test_keys_are_counted_apart() -> None:
    retries = TimerRetries()
    assert retries.failed(("session", 1), 0) == 100
    assert retries.failed(("session", 1), 0) == 200
    assert retries.failed(("session", 2), 0) == 100
    retries.succeeded(("session", 2))
    assert retries.failures(("session", 1)) == 2
    retries.succeeded("never-failed")  # harmless
    assert retries.failures(("session", 1)) == 2
    retries.clear()
    assert retries.failures(("session", 1)) == 0
    assert retries.failed(("session", 1), 0) == 100


def test_custom_settings() -> None:
    retries = TimerRetries(backoff_ms=10, backoff_max_ms=25, attempts=3)
    assert retries.failed("k", 5) == 15
    assert retries.failed("k", 5) == 25
    assert retries.failed("k", 5) is None


# -- RestartBackoff -------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_restart_defaults() -> None:
    assert (FIRST_DELAY_S, MAX_DELAY_S, HEALTHY_S) == (0.5, 30.0, 60.0)


def test_restarts_after_short_lives_double_up_to_the_cap() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(clock=clock)
    delays = []
    for _ in range(10):
        clock.now += 1.0  # each life is short
        delays.append(backoff.next_delay_s())
        clock.now += delays[-1]
        backoff.started()
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]


def test_the_first_restart_is_soon() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(clock=clock)
    assert backoff.next_delay_s() <= 2.0


def test_a_host_that_lived_long_enough_starts_over() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(clock=clock)
    for _ in range(5):
        backoff.next_delay_s()
        backoff.started()
    clock.now += 59.9
    assert backoff.next_delay_s() == 16.0  # not healthy yet: the sixth delay
    backoff.started()
    clock.now += 60.0
    assert backoff.next_delay_s() == 0.5  # served a minute: from the shortest delay again
    backoff.started()
    clock.now += 1.0
    assert backoff.next_delay_s() == 1.0


def test_the_lifetime_counts_from_the_last_start() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(clock=clock)
    assert backoff.next_delay_s() == 0.5
    clock.now += 120.0  # a long wait before the restart is not a long life
    backoff.started()
    clock.now += 1.0
    assert backoff.next_delay_s() == 1.0


def test_a_long_life_since_construction_counts_too() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(clock=clock)
    for _ in range(3):
        backoff.next_delay_s()  # three quick failures without a restart in between
    clock.now += HEALTHY_S
    assert backoff.next_delay_s() == 0.5
    backoff.started()
    assert backoff.next_delay_s() == 1.0


@pytest.mark.parametrize("failures", [20, 64, 1_000])
def test_many_restarts_never_overflow_the_cap(failures: int) -> None:
    clock = FakeClock()
    backoff = RestartBackoff(first_s=0.5, max_s=30.0, clock=clock)
    delays = [backoff.next_delay_s() for _ in range(failures)]
    assert max(delays) == 30.0
    assert delays[-1] == 30.0


def test_custom_restart_settings() -> None:
    clock = FakeClock()
    backoff = RestartBackoff(first_s=0.1, max_s=0.3, healthy_s=5.0, clock=clock)
    assert [backoff.next_delay_s() for _ in range(3)] == [0.1, 0.2, 0.3]
    backoff.started()
    clock.now += 5.0
    assert backoff.next_delay_s() == 0.1
