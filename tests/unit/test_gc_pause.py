"""The collector pause is counted across threads and nests."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from kafkacoord.gc_pause import gc_paused, raise_young_threshold


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_pause_turns_the_collector_off_and_back_on() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_disabled_pause_changes_nothing() -> None:
    with gc_paused(enabled=False):
        assert gc.isenabled()


def test_nested_pauses_end_with_the_outer_one() -> None:
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_ending_on_one_thread_keeps_another_threads_pause() -> None:
    # The first thread's pause ends while the second's is still open (a standby's pass
    # ending in the middle of a takeover's replay): the collector must stay off.
    first_in, second_in, first_out, second_may_leave = (threading.Event() for _ in range(4))
    seen: dict[str, bool] = {}

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gc_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()
            second_may_leave.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert second_may_leave.is_set()
    assert seen == {"after the first ended": False}
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_the_young_threshold_is_raised_and_the_older_ones_kept() -> None:
    before = gc.get_threshold()
    try:
        raise_young_threshold(12_345)
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        gc.set_threshold(*before)
