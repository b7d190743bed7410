"""A node's lease: held from an unfenced answer until its heartbeat's send plus the session."""

from __future__ import annotations

from types import SimpleNamespace

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
    lease.log_end(0)  # the first grant, like any after a lapse, waits for the tail
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


def _lease(clock: Clock) -> tuple[NodeLease, SimpleNamespace]:
    """A lease, and the metadata tail's offset its agent's follower reports."""
    tail = SimpleNamespace(offset=0)
    return NodeLease(clock, read_to=lambda: tail.offset), tail


def _granted(clock: Clock) -> NodeLease:
    """A lease granted at ``clock``'s now, the log's end read and reached."""
    lease, _ = _lease(clock)
    lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    lease.log_end(0)
    return lease


def test_a_renewal_after_a_lapse_holds_only_once_the_tail_reads_to_the_logs_end() -> None:
    """Paused past its session, the node was fenced and its shards moved; its first
    heartbeat after unfences it. Until its tail has read the moves, it leads nothing."""
    clock = Clock()
    lease, tail = _lease(clock)
    tail.offset = 40
    lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    lease.log_end(40)
    assert lease.held()
    clock.now += 6.0  # paused: lapsed
    assert not lease.held()
    lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    assert lease.needs_log_end() and not lease.held()  # the end is not read yet
    lease.log_end(55)
    assert not lease.needs_log_end() and not lease.held()
    tail.offset = 54
    assert not lease.held()
    tail.offset = 55
    assert lease.held()
    lease.log_end(90)  # only the end read after a lapse counts
    assert lease.held()


def test_a_renewal_while_held_waits_for_nothing() -> None:
    clock = Clock()
    lease = _granted(clock)
    clock.now += 1.0
    lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    assert not lease.needs_log_end() and lease.held()


def test_an_unread_end_keeps_the_lease_from_holding_through_later_renewals() -> None:
    """The broker failed the read of the log's end: later answers do not make up for it."""
    clock = Clock()
    lease, tail = _lease(clock)
    tail.offset = 10**6
    for _ in range(3):
        lease.answered(clock.now, fenced=False, session_timeout_ms=3000, controller_epoch=1)
        clock.now += 0.5
        assert lease.needs_log_end() and not lease.held()
    lease.log_end(7)
    assert lease.held()


def test_a_late_answer_to_a_send_before_the_lapse_grants_nothing() -> None:
    clock = Clock()
    lease = _granted(clock)
    sent = clock.now
    clock.now += 6.0  # the answer sat in the socket while the node was paused
    lease.answered(sent, fenced=False, session_timeout_ms=3000, controller_epoch=1)
    assert not lease.held()
