"""Partition leader election strategies (docs/architecture.md#leader-election).

Kafka's ``kafka.controller.PartitionLeaderElectionAlgorithms`` plus the ISR handling the
``PartitionStateMachine`` applies around each of them:

=====================  ===================================================  ==================
strategy               leader                                               new ISR
=====================  ===================================================  ==================
offline (clean)        first replica of AR that is live and in the ISR      live ISR members
offline (ELR)          else a live ELR member, then the last known leader   ``[leader]``
offline (unclean)      if none, and unclean election is on: first live AR   ``[leader]``
reassigned             first replica of the target set that is live + ISR   unchanged
preferred              AR[0], if it is live and in the ISR                  unchanged
controlled shutdown    first replica of AR live, in ISR, not shutting down  ISR minus those
=====================  ===================================================  ==================

Every strategy walks the replica list in its given order, so the leader is always a
member of that list. ``*_leader`` functions return just the leader (``None`` when the
election fails); ``*_election`` functions return an :class:`ElectionResult` carrying the
ISR to write as well. The ISR keeps the order it was given in when it is a sequence, and
is sorted otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "ElectionResult",
    "controlled_shutdown_election",
    "controlled_shutdown_isr",
    "controlled_shutdown_leader",
    "offline_election",
    "offline_leader",
    "preferred_election",
    "preferred_leader",
    "reassigned_election",
    "reassigned_leader",
]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A successful election: the new leader and the ISR to record with it.

    ``unclean`` is true when the leader was taken from outside the ISR and the ELR (an
    unclean election); the ISR is then just ``(leader,)`` and data may have been lost.
    ``via`` says where the leader came from: ``isr``, ``elr`` (KIP-966), ``last_known``
    (the last known leader) or ``unclean``.
    """

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False
    via: str = "isr"


def _ordered(isr: Collection[int]) -> list[int]:
    return list(isr) if isinstance(isr, Sequence) else sorted(isr)


def _first_live_in_isr(
    replicas: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    # A plain loop over a few replicas: no sets built (a failover elects a leader for
    # each of hundreds of thousands of partitions).
    for r in replicas:
        if r in live and r in isr:
            return r
    return None


def offline_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], *, unclean: bool
) -> int | None:
    """Leader for an offline (or new) partition.

    The first replica of ``assignment`` that is live and in ``isr``. If there is none and
    ``unclean`` (``unclean.leader.election.enable``) is set, the first live replica of
    ``assignment``. Otherwise ``None``: the partition stays offline.
    """
    leader = _first_live_in_isr(assignment, isr, live)
    if leader is None and unclean:
        live_set = frozenset(live)
        leader = next((r for r in assignment if r in live_set), None)
    return leader


def offline_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    *,
    unclean: bool,
    elr: Collection[int] = (),
    last_known: Sequence[int] = (),
) -> ElectionResult | None:
    """:func:`offline_leader` with the ISR Kafka writes alongside it, and KIP-966's steps.

    A clean election keeps the live members of the ISR. Without a live ISR member, a live
    member of ``elr`` leads (it holds every committed record), then the first live
    member of ``last_known`` (the last leader); the ISR becomes ``(leader,)``. Only then
    an unclean election, if allowed, sets the ISR to ``(leader,)`` and flags it.
    """
    live_set = frozenset(live)
    leader = _first_live_in_isr(assignment, isr, live_set)
    if leader is not None:
        return ElectionResult(leader, tuple(r for r in _ordered(isr) if r in live_set))
    leader = _first_live_in_isr(assignment, elr, live_set)
    if leader is not None:
        return ElectionResult(leader, (leader,), via="elr")
    leader = next((r for r in last_known if r in live_set and r in assignment), None)
    if leader is not None:
        return ElectionResult(leader, (leader,), via="last_known")
    leader = offline_leader(assignment, isr, live_set, unclean=unclean)
    if leader is None:
        return None
    return ElectionResult(leader, (leader,), unclean=True, via="unclean")


def reassigned_leader(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """Leader during a reassignment: the first replica of the target set (TRS) that is live
    and in ``isr``, else ``None``."""
    return _first_live_in_isr(target, isr, live)


def reassigned_election(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> ElectionResult | None:
    """:func:`reassigned_leader`; the ISR is left unchanged."""
    leader = reassigned_leader(target, isr, live)
    return None if leader is None else ElectionResult(leader, tuple(_ordered(isr)))


def preferred_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """The preferred replica ``assignment[0]`` if it is live and in ``isr``, else ``None``.

    Being the current leader already is not a failure: the result is the same.
    """
    if not assignment:
        return None
    preferred = assignment[0]
    return preferred if preferred in frozenset(live) and preferred in frozenset(isr) else None


def preferred_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> ElectionResult | None:
    """:func:`preferred_leader`; the ISR is left unchanged."""
    leader = preferred_leader(assignment, isr, live)
    return None if leader is None else ElectionResult(leader, tuple(_ordered(isr)))


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    """Leader when moving leadership off shutting-down brokers: the first replica of
    ``assignment`` that is live, in ``isr`` and not in ``shutting_down``, else ``None``."""
    down = frozenset(shutting_down)
    for r in assignment:
        if r in live and r not in down and r in isr:
            return r
    return None


def controlled_shutdown_isr(isr: Collection[int], shutting_down: Collection[int]) -> list[int]:
    """The ISR with every shutting-down broker removed."""
    down = frozenset(shutting_down)
    return [r for r in _ordered(isr) if r not in down]


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult | None:
    """:func:`controlled_shutdown_leader` with :func:`controlled_shutdown_isr` as the ISR."""
    leader = controlled_shutdown_leader(assignment, isr, live, shutting_down)
    if leader is None:
        return None
    return ElectionResult(leader, tuple(controlled_shutdown_isr(isr, shutting_down)))
