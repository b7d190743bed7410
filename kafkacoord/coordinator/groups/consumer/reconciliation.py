"""Reconciliation of one member towards its target (Kafka's ``CurrentAssignmentBuilder``).

A member moves towards its target assignment in steps that never let two members own a
partition at once:

- **UNREVOKED_PARTITIONS**: it still owns partitions that go elsewhere; it keeps its epoch
  until a heartbeat no longer reports them.
- **UNRELEASED_PARTITIONS**: it has the target epoch, but some of its target partitions are
  still owned by their previous member; they are given once released.
- **STABLE**: it owns exactly its target, at the target epoch.

Pure: the caller supplies the owner epochs of partitions and what the member reported.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from kafkacoord.codecs.models import MemberState
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError

from .assignment import EMPTY, Assignment
from .member import ConsumerMember

__all__ = ["PartitionEpoch", "reconcile"]

PartitionEpoch = Callable[[str, int], int]
"""The epoch of a partition's current owner, or -1 when nobody owns it."""


def reconcile(
    member: ConsumerMember,
    *,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
    subscribed: Collection[str],
) -> ConsumerMember:
    """The member's next state (``member`` itself when it cannot move).

    ``owned`` is what the member reported in this heartbeat (``None``: not reported, which
    counts as still owning everything); ``subscribed`` the topics it subscribes to now.
    """
    step = _Step(target_epoch, target, partition_epoch, owned, subscribed)
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, step)
        return _drop_unsubscribed(member, owned, subscribed)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, owned, subscribed)
        return _next(member, member.member_epoch, step)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, step)
    # UNKNOWN: written by a newer coordinator; start over from nothing.
    if owned is None or any(owned.values()):
        raise ProtocolError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "the member is in an unknown state; it must give up all its partitions and rejoin",
        )
    return _next(member, target_epoch, step)


@dataclass(frozen=True, slots=True)
class _Step:
    """What one reconciliation step reads: the target assignment and its epoch, who owns
    each partition now, what the member says it owns (``None``: not reported) and the
    topics it subscribes to."""

    target_epoch: int
    target: Assignment
    partition_epoch: PartitionEpoch
    owned: Assignment | None
    subscribed: Collection[str]


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:
        return True
    return any(ps & revoking.get(t, frozenset()) for t, ps in owned.items())


def _with_epoch(member: ConsumerMember, epoch: int, **changes: object) -> ConsumerMember:
    # Kafka's updateMemberEpoch: the previous epoch is the one the member had before.
    return member.replace(member_epoch=epoch, previous_member_epoch=member.member_epoch,
                          **changes)  # fmt: skip


def _drop_unsubscribed(
    member: ConsumerMember, owned: Assignment | None, subscribed: Collection[str]
) -> ConsumerMember:
    """A topic the member no longer subscribes to leaves its assignment at once."""
    gone = [t for t in member.assigned if t not in subscribed]
    if not gone:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    revoking = dict(member.pending_revocation)
    for topic in gone:
        revoking[topic] = revoking.get(topic, frozenset()) | member.assigned[topic]
    if _owns_any(owned, revoking):
        return _with_epoch(member, member.member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                           assigned=assigned, pending_revocation=revoking)  # fmt: skip
    return _with_epoch(member, member.member_epoch, assigned=assigned)


def _next(member: ConsumerMember, member_epoch: int, step: _Step) -> ConsumerMember:
    target_epoch, target, partition_epoch = step.target_epoch, step.target, step.partition_epoch
    owned, subscribed = step.owned, step.subscribed
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    pending: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        current = member.assigned.get(topic, frozenset())
        keep = current & wanted
        give_up = current - keep
        own_revoking = member.pending_revocation.get(topic, frozenset())
        to_get = set()
        for partition in wanted - keep:
            # Another member still owns it: wait until it is released. A partition this
            # member is itself revoking may come straight back.
            if partition_epoch(topic, partition) != -1 and partition not in own_revoking:
                unreleased = True
            else:
                to_get.add(partition)
        if keep:
            assigned[topic] = keep
        if give_up:
            revoking[topic] = give_up
        if to_get:
            pending[topic] = frozenset(to_get)

    if revoking and _owns_any(owned, revoking):
        return _with_epoch(member, member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                           assigned=assigned, pending_revocation=revoking)  # fmt: skip
    for topic, partitions in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned,
                       pending_revocation=EMPTY)  # fmt: skip
