"""A node's lease: held from an unfenced answer until its heartbeat's send plus the session."""

from __future__ import annotations

from kafkacoord.client.agent.lease import NodeLease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_lease_before_the_first_answer() -> None:
    assert not NodeLease(Clock()).held()


def test_it_runs_from_the_send_not_the_answer() -> None:
    clock = Clock()
    lease = NodeLease(clock)
    sent = lease.now()
    clock.now += 2.0  # a slow answer
    lease.answered(sent, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    assert lease.held() and abs(lease.remaining_s() - 1.0) < 1e-9
    clock.now += 0.999
    assert lease.held()
    clock.now += 0.002
    assert not lease.held()  # past send + session: the controller may have fenced it


def test_a_fenced_answer_ends_it_and_a_late_answer_never_shortens_it() -> None:
    clock = Clock()
    lease = NodeLease(clock)
    lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    # An answer to an older send:
    lease.answered(clock.now - 2.5, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    assert abs(lease.remaining_s() - 3.0) < 1e-9
    lease.answered(clock.now, fenced=True, session_timeout_ms=3000, controller_epoch=1)
    assert not lease.held()


def test_a_controller_that_names_no_session_grants_none() -> None:
    lease = NodeLease(Clock())
    lease.answered(100.0, fenced=False, session_timeout_ms=-1, controller_epoch=1)
    assert not lease.held()


def test_a_deposed_controllers_answer_renews_nothing() -> None:
    clock = Clock()
    lease = NodeLease(clock)
    assert lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=4)
    clock.now += 2.0
    # Epoch 3 still answers (it has not noticed that 4 took over): ignored.
    assert not lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=3)
    assert abs(lease.remaining_s() - 1.0) < 1e-9
    # Nor may one older than what the node read in the metadata log.
    assert not lease.answered(
        clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=4, known_epoch=5
    )
    assert lease.controller_epoch == 4
    assert lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=5)
    assert abs(lease.remaining_s() - 3.0) < 1e-9
