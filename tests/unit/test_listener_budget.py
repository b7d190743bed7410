"""The listener's process-wide bounds without sockets: the open-file limit and the budget
of bytes all connections hold together."""

from __future__ import annotations

import resource

import pytest

from kafkacoord.server.settings import Settings
from kafkacoord.wire.limits import (
    FD_HEADROOM,
    BufferBudget,
    ListenerLimits,
    ListenerStats,
    fit_to_fd_limit,
)

UNLIMITED = resource.RLIM_INFINITY


class FakeRlimit:
    """RLIMIT_NOFILE as the kernel keeps it: the soft limit may rise up to the hard one."""

    def __init__(self, soft: int, hard: int, *, may_raise: bool = True) -> None:
        self.soft, self.hard, self.may_raise = soft, hard, may_raise

    def get(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which: int, limits: tuple[int, int]) -> None:
        soft, hard = limits
        if not self.may_raise or (self.hard != UNLIMITED and soft > self.hard):
            raise ValueError("not allowed to raise the current limit")
        self.soft, self.hard = soft, hard


@pytest.fixture
def rlimit(monkeypatch: pytest.MonkeyPatch) -> FakeRlimit:
    fake = FakeRlimit(1024, 1024)
    monkeypatch.setattr(resource, "getrlimit", fake.get)
    monkeypatch.setattr(resource, "setrlimit", fake.set)
    return fake


def test_the_soft_open_file_limit_is_raised_to_fit_max_connections(rlimit: FakeRlimit) -> None:
    rlimit.soft, rlimit.hard = 1024, 1_048_576
    limits = fit_to_fd_limit(ListenerLimits(max_connections=10_000))
    assert limits.max_connections == 10_000
    assert rlimit.soft == 10_000 + FD_HEADROOM


def test_max_connections_is_lowered_when_the_hard_limit_is_short(rlimit: FakeRlimit) -> None:
    rlimit.soft, rlimit.hard = 1024, 4096
    limits = fit_to_fd_limit(ListenerLimits(max_connections=10_000))
    assert rlimit.soft == 4096  # raised as far as it goes
    assert limits.max_connections == 4096 - FD_HEADROOM


def test_max_connections_is_lowered_when_the_limit_may_not_be_raised(
    rlimit: FakeRlimit,
) -> None:
    rlimit.soft, rlimit.hard, rlimit.may_raise = 256, 4096, False
    limits = fit_to_fd_limit(ListenerLimits(max_connections=10_000))
    assert rlimit.soft == 256
    assert limits.max_connections == 128  # half of a limit smaller than the headroom


def test_a_limit_that_fits_is_left_alone(rlimit: FakeRlimit) -> None:
    rlimit.soft, rlimit.hard = 1024, 1024
    assert fit_to_fd_limit(ListenerLimits(max_connections=100)).max_connections == 100
    assert rlimit.soft == 1024


def test_settings_carry_every_listener_limit() -> None:
    limits = Settings(
        request_read_timeout_ms=5000, tls_handshake_timeout_ms=2000,
        write_buffer_high_bytes=65536, max_buffered_bytes=8 * 1024 * 1024,
    ).listener_limits()  # fmt: skip
    assert (limits.request_read_timeout_ms, limits.tls_handshake_timeout_ms) == (5000, 2000)
    assert (limits.write_buffer_high_bytes, limits.max_buffered_bytes) == (65536, 8388608)
    defaults = Settings().listener_limits()
    assert defaults == ListenerLimits()  # one set of defaults, not two


class Conn:
    """A connection as the budget sees it; ``buffered`` is what its transport holds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.held = 0
        self.held_back = False
        self.buffered = 0
        self.reading = True

    def measure(self) -> int:
        return self.buffered

    def drained(self) -> bool:
        return self.buffered == 0

    def hold_back(self, held_back: bool) -> None:
        self.reading = not held_back

    def __repr__(self) -> str:
        return self.name


def _hold(budget: BufferBudget, conn: Conn, size: int) -> None:
    conn.buffered = size
    budget.account(conn, size)


def test_past_the_budget_the_heaviest_stop_being_read_until_the_rest_hold_an_eighth() -> None:
    stats = ListenerStats()
    budget = BufferBudget(800, stats)
    light, mid, heavy, heaviest = Conn("light"), Conn("mid"), Conn("heavy"), Conn("heaviest")
    for conn, size in ((light, 50), (mid, 150), (heavy, 300), (heaviest, 290)):
        _hold(budget, conn, size)
    assert all(c.reading for c in (light, mid, heavy, heaviest))  # 790: within it
    _hold(budget, heaviest, 310)  # 810: over
    assert (heaviest.reading, heavy.reading, mid.reading, light.reading) == (
        False, False, False, True,
    )  # fmt: skip
    assert stats.buffered_bytes == 810


def test_held_back_connections_are_read_again_when_drained_or_when_the_total_fell() -> None:
    budget = BufferBudget(800, ListenerStats())
    stuck, reader = Conn("stuck"), Conn("reader")
    _hold(budget, stuck, 500)
    _hold(budget, reader, 400)
    assert not (stuck.reading or reader.reading)
    reader.buffered = 0  # its client took every reply; the stuck one still holds 500
    budget.tick()
    assert (reader.reading, stuck.reading) == (True, False)
    stuck.buffered = 390  # the total fell under half the budget
    budget.tick()
    assert stuck.reading
    assert budget.total == 390


def test_a_forgotten_connection_leaves_the_budget() -> None:
    budget = BufferBudget(800, ListenerStats())
    gone, other = Conn("gone"), Conn("other")
    _hold(budget, gone, 900)
    _hold(budget, other, 10)
    budget.forget(gone)
    assert (budget.total, gone.held_back) == (10, False)
    assert not budget.pressed
