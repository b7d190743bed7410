"""A host that fails while it stops takes only itself down: the processor's turn goes on
to the other hosts, and later turns still run (found by the fault campaign: a fenced
controller's producer raised SystemError from its flush, which killed the processor
thread, so the controller this daemon was elected again later never ran)."""

from __future__ import annotations

from kafkacoord.coordinator.runtime.processor import run_turn
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.coordinator.runtime.turn import GroupCommits, Turn


class Host:
    def __init__(self, name: str, *, fails: bool = False) -> None:
        self.name = name
        self.detached = False
        self.fails = fails
        self.steps = 0
        self.stopped: list[Exception | None] = []

    def wait_s(self) -> float:
        return 60.0

    def step(self, events: list[object], turn: Turn) -> bool:
        self.steps += 1
        if self.fails:
            raise RuntimeError("append to __kc_metadata-0: fenced by a newer writer")
        return True

    def refuse(self, request: Request) -> None:
        raise AssertionError("every host here is attached")

    def finish(self, failure: Exception | None = None) -> None:
        self.stopped.append(failure)

    def fail(self, exc: Exception) -> None:
        self.stopped.append(exc)
        raise SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL")


def test_a_host_failing_as_it_stops_leaves_the_turn_and_the_next_ones_running() -> None:
    fenced, other = Host("controller", fails=True), Host("offsets-0")
    hosts = {id(fenced): fenced, id(other): other}
    commits = GroupCommits(lambda waiters: None)
    run_turn(hosts, [(fenced, "event"), (other, "event")], commits)
    assert fenced.steps == 1 and len(fenced.stopped) == 1
    assert other.steps == 1 and other.stopped == []
    assert list(hosts) == [id(other)], "the failed host is let go, the other kept"
    run_turn(hosts, [(other, "event")], commits)
    assert other.steps == 2
