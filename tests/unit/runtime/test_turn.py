"""The append barrier of a turn and the bound on groups in flight (no broker, no clock)."""

from __future__ import annotations

import threading

import pytest

from kafkacoord.coordinator.runtime.turn import AppendBarrier, GroupCommits
from kafkacoord.storage.errors import AppendError


class Outcomes:
    """What each batch was told, and in which order things happened."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self.woken: list[list[object]] = []

    def record(self, name: str) -> object:
        def record(offsets: list[int], error: AppendError | None) -> None:
            self.events.append((name, offsets, error))

        return record

    def finish(self, name: str) -> object:
        return lambda: self.events.append(("finished", name))

    def wake(self, waiters: list[object]) -> None:
        self.woken.append(list(waiters))


def test_batches_finish_together_once_the_last_arrives_and_the_turn_is_sealed() -> None:
    seen = Outcomes()
    barrier = AppendBarrier(seen.wake)
    a = barrier.join(seen.record("a"), seen.finish("a"), "host-a")  # type: ignore[arg-type]
    b = barrier.join(seen.record("b"), seen.finish("b"), "host-b")  # type: ignore[arg-type]
    a([5, 6], None)
    assert seen.events == [("a", [5, 6], None)]  # recorded, not yet finished
    barrier.seal()
    assert not seen.woken
    failure = AppendError("fenced", retriable=False)
    b([], failure)
    # Each outcome is its own; only the moment they are looked at is shared.
    assert seen.events == [
        ("a", [5, 6], None),
        ("b", [], failure),
        ("finished", "a"),
        ("finished", "b"),
    ]
    assert seen.woken == [["host-a", "host-b"]]


def test_batches_that_finish_while_the_turn_submits_wait_for_the_seal() -> None:
    seen = Outcomes()
    barrier = AppendBarrier(seen.wake)
    barrier.join(seen.record("a"), seen.finish("a"), "h")([1], None)  # type: ignore[arg-type]
    barrier.join(seen.record("b"), seen.finish("b"), "h")([2], None)  # type: ignore[arg-type]
    assert ("finished", "a") not in seen.events
    barrier.seal()
    assert seen.events[-2:] == [("finished", "a"), ("finished", "b")]
    assert seen.woken == [["h"]]  # a host with two batches is woken once


def test_a_turn_with_no_batches_wakes_nobody() -> None:
    seen = Outcomes()
    barrier = AppendBarrier(seen.wake)
    assert not barrier
    barrier.seal()
    assert seen.woken == []


def test_batches_arriving_on_many_threads_finish_exactly_once() -> None:
    seen = Outcomes()
    barrier = AppendBarrier(seen.wake)
    finished: list[int] = []
    callbacks = [
        barrier.join(lambda o, e: None, lambda i=i: finished.append(i), f"h{i % 4}")
        for i in range(200)
    ]
    barrier.seal()
    threads = [
        threading.Thread(target=lambda cbs=callbacks[k::8]: [cb([1], None) for cb in cbs])
        for k in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(finished) == list(range(200))
    assert len(seen.woken) == 1 and sorted(seen.woken[0]) == ["h0", "h1", "h2", "h3"]  # type: ignore[type-var]


def test_a_turn_beyond_the_limit_holds_its_records_for_the_next_group() -> None:
    seen = Outcomes()
    commits = GroupCommits(seen.wake, max_inflight=1)
    first, held = commits.begin()
    assert first.may_append and held == []
    done = first.appends.join(seen.record("a"), seen.finish("a"), "host-a")  # type: ignore[arg-type]
    commits.end(first)
    assert commits.saturated

    # While the group is in flight a turn may not append: its hosts hold their records.
    second, held = commits.begin()
    assert not second.may_append and held == []
    second.hold("host-b")
    second.hold("host-c")
    commits.end(second)
    third, held = commits.begin()
    assert not third.may_append and held == []  # still nothing to take
    third.hold("host-b")
    commits.end(third)

    done([1], None)
    assert not commits.saturated and seen.woken == [["host-a"]]
    # The next turn takes every host that held records, once each.
    fourth, held = commits.begin()
    assert fourth.may_append and held == ["host-b", "host-c"]
    commits.end(fourth)
    assert commits.begin()[1] == []


def test_more_groups_in_flight_when_allowed() -> None:
    seen = Outcomes()
    commits = GroupCommits(seen.wake, max_inflight=2)
    pending = []
    for name in ("a", "b"):
        turn, _ = commits.begin()
        assert turn.may_append
        pending.append(turn.appends.join(seen.record(name), seen.finish(name), name))  # type: ignore[arg-type]
        commits.end(turn)
    assert commits.inflight == 2 and not commits.begin()[0].may_append
    pending[1]([2], None)  # groups finish independently
    assert commits.inflight == 1 and seen.woken == [["b"]]


def test_a_turn_that_appended_nothing_is_not_in_flight() -> None:
    commits = GroupCommits(lambda waiters: None)
    turn, _ = commits.begin()
    commits.end(turn)
    assert commits.inflight == 0 and not commits.saturated


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        GroupCommits(lambda waiters: None, max_inflight=0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_stalled_group_is_released_and_its_other_batches_finish_at_once() -> None:
    seen, clock = Outcomes(), Clock()
    commits = GroupCommits(seen.wake, max_inflight=1, stall_s=0.5, clock=clock)
    first, _ = commits.begin()
    hung = first.appends.join(seen.record("a"), seen.finish("a"), "host-a")  # type: ignore[arg-type]
    fast = first.appends.join(seen.record("b"), seen.finish("b"), "host-b")  # type: ignore[arg-type]
    commits.end(first)
    fast([7], None)
    assert ("finished", "b") not in seen.events  # the group waits for its last batch

    # Not yet stalled: a turn holds its records back, and waits as long as is left.
    clock.now += 0.4
    assert commits.wait_s() == pytest.approx(0.1)
    second, held = commits.begin()
    assert not second.may_append
    second.hold("host-c")
    commits.end(second)

    # Stalled: the group no longer counts; what arrived finishes, the held host goes on.
    clock.now += 0.2
    third, held = commits.begin()
    assert third.may_append and held == ["host-c"]
    assert commits.released == 1 and commits.inflight == 0 and commits.wait_s() is None
    assert ("finished", "b") in seen.events and ("finished", "a") not in seen.events
    assert seen.woken == [["host-b"]]
    commits.end(third)

    # The hung batch finishes alone when it arrives, and wakes only its own host.
    hung([8], None)
    assert seen.events[-1] == ("finished", "a") and seen.woken[-1] == ["host-a"]
    assert commits.inflight == 0


def test_a_group_that_completes_as_it_stalls_finishes_once() -> None:
    seen, clock = Outcomes(), Clock()
    commits = GroupCommits(seen.wake, max_inflight=1, stall_s=0.5, clock=clock)
    turn, _ = commits.begin()
    done = turn.appends.join(seen.record("a"), seen.finish("a"), "host-a")  # type: ignore[arg-type]
    commits.end(turn)
    done([1], None)
    assert not turn.appends.release()  # complete first: nothing left to release
    clock.now += 1
    assert commits.begin()[0].may_append and commits.released == 0
    assert seen.events.count(("finished", "a")) == 1 and seen.woken == [["host-a"]]


def test_a_stalled_group_is_released_with_room_to_spare_and_younger_ones_wait() -> None:
    seen, clock = Outcomes(), Clock()
    commits = GroupCommits(seen.wake, max_inflight=4, stall_s=0.5, clock=clock)
    assert commits.wait_s() is None  # nothing in flight: no deadline
    for name in ("a", "b"):
        turn, _ = commits.begin()
        turn.appends.join(seen.record(name), seen.finish(name), name)  # type: ignore[arg-type]
        commits.end(turn)
        clock.now += 0.3
    assert commits.wait_s() == pytest.approx(0.0)  # "a" went in flight 0.6 s ago
    commits.begin()
    # Its replies must not wait for the limit to fill: it is released; "b" is not.
    assert commits.released == 1 and commits.inflight == 1
    assert commits.wait_s() == pytest.approx(0.2)
