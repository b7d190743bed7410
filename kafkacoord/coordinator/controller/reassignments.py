"""Partition reassignment (Kafka's ``onPartitionReassignment``, KIP-455).

With RS the current replicas, ORS the original ones, TRS the target, AR = TRS - ORS being
added and RR = ORS - TRS being removed, each step is its own partition record, so a new
controller resumes from the persisted ``reassignment`` field:

=====  ================================================================  ==============
step   record                                                            ``step``
=====  ================================================================  ==============
A1+A2  leader epoch + 1; RS = TRS + ORS; AR replicas start (New)         ``A2``
(B)    the ISR grows through ReplicaStatus / AlterPartition until
       it holds all of TRS
B3     if the leader is not in TRS or not live: a leader from TRS        ``B3``
B4     RR replicas go offline and leave the ISR                          ``B4``
B5     RR replicas are deleted (replica states only, no record)
B6     RS = TRS, reassignment cleared                                    (none)
=====  ================================================================  ==============

B3 and B4 are skipped when they would change nothing. At most
``max_concurrent_reassignments`` partitions move at once; the others wait as records
with step ``QUEUED`` (replicas untouched) and start, oldest first, as slots free up.
Cancelling (``replicas=None``) reverts to ORS; a new target for a moving partition
reverts and restarts in one record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kafkacoord.codecs.models import PartitionValue, Reassignment
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import (
    AlterReassignments,
    PartitionResult,
    PartitionResults,
)

from .batch import Batch
from .config import ControllerConfig
from .election import offline_leader
from .image import TP
from .partition_change import NO_LEADER, Election, partition_change
from .partitions import PartitionManager, existing_partition
from .states import ReplicaState, ReplicaStateMachine

__all__ = ["STEP_A2", "STEP_B3", "STEP_B4", "STEP_QUEUED", "ReassignmentManager", "checked_target"]

STEP_QUEUED: Final = "QUEUED"
STEP_A2: Final = "A2"
STEP_B3: Final = "B3"
STEP_B4: Final = "B4"

_REMOVAL: Final = (
    ReplicaState.OFFLINE,
    ReplicaState.DELETION_STARTED,
    ReplicaState.DELETION_SUCCESSFUL,
    ReplicaState.NON_EXISTENT,
)


def checked_target(batch: Batch, name: str, replicas: Sequence[int]) -> tuple[int, ...]:
    """A target replica list that names each registered node once."""
    target = tuple(replicas)
    if not target:
        raise ProtocolError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"empty target replica list for {name}"
        )
    if len(set(target)) != len(target):
        raise ProtocolError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"duplicate nodes in the target replicas {list(target)} of {name}",
        )
    unknown = sorted(n for n in set(target) if batch.node(n) is None)
    if unknown:
        raise ProtocolError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"cannot reassign {name} to unknown nodes {unknown}",
        )
    return target


class _Slots:
    """How many partitions are moving now, within one request or timer run."""

    __slots__ = ("active",)

    def __init__(self, active: int) -> None:
        self.active = active


class ReassignmentManager:
    """Starts, steps, queues, cancels and resumes partition reassignments (KIP-455)."""

    def __init__(
        self,
        config: ControllerConfig,
        partitions: PartitionManager,
        replica_states: ReplicaStateMachine,
    ) -> None:
        self.config = config
        self.partitions = partitions
        self.replica_states = replica_states

    # -- requests ----------------------------------------------------------------------------

    def alter(self, batch: Batch, body: AlterReassignments) -> PartitionResults:
        slots = _Slots(self._scan(batch)[0])
        results: list[PartitionResult] = []
        for target in body.reassignments:
            try:
                self.alter_one(batch, target.topic, target.partition, target.replicas, slots)
            except ProtocolError as exc:
                results.append(
                    PartitionResult(
                        topic=target.topic,
                        partition=target.partition,
                        error=exc.code,
                        message=exc.message,
                    )
                )
            else:
                results.append(PartitionResult(topic=target.topic, partition=target.partition))
        return PartitionResults(results=results)

    def alter_one(
        self,
        batch: Batch,
        topic: str,
        partition: int,
        replicas: Sequence[int] | None,
        slots: _Slots | None = None,
    ) -> None:
        """Start, change, queue or (``replicas=None``) cancel one partition's reassignment."""
        if slots is None:
            slots = _Slots(self._scan(batch)[0])
        current = existing_partition(batch, topic, partition)
        moving = current.reassignment
        if replicas is None:
            if moving is None:
                raise ProtocolError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    f"{topic}-{partition} has no reassignment to cancel",
                )
            self._cancel(batch, current, slots)
            return
        target = self._validate(batch, topic, partition, replicas)
        if moving is None:
            if target == current.replicas:
                return
            if slots.active >= self.config.max_concurrent_reassignments:
                self._queue(batch, current, target, batch.now_ms)
            else:
                self._start(batch, current, target, slots)
        elif moving.step == STEP_QUEUED:
            if target == current.replicas:
                partition_change(batch, current).set_reassignment(None).put()
            else:
                self._queue(batch, current, target, moving.started_ms)
        elif target != moving.target_replicas:
            # A new target for a moving partition: one record, from the original replicas.
            retargeted = self._retargeted(batch, current, target)
            self._move_replica_states(batch, current, retargeted)
            batch.put_partition(retargeted)
            if retargeted.reassignment is None or self.advance(batch, retargeted):
                slots.active -= 1

    def _validate(
        self, batch: Batch, topic: str, partition: int, replicas: Sequence[int]
    ) -> tuple[int, ...]:
        name = f"{topic}-{partition}"
        target = checked_target(batch, name, replicas)
        spec = self.config.internal_topic(topic)
        if spec is not None:
            lacking = sorted(n for n in set(target) if spec.role not in batch.node(n).roles)  # type: ignore[union-attr]
            if lacking:
                raise ProtocolError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"replicas of internal topic {topic!r} must be nodes with role "
                    f"{spec.role!r}; nodes {lacking} lack it",
                )
        return target

    # -- steps -------------------------------------------------------------------------------

    def _started(
        self, batch: Batch, current: PartitionValue, target: tuple[int, ...]
    ) -> PartitionValue:
        """A1 + A2 from ``current``, not moving or queued (its replicas are the ORS). Not
        recorded."""
        original = current.replicas
        moving = Reassignment(
            original_replicas=original,
            target_replicas=target,
            adding_replicas=tuple(r for r in target if r not in original),
            removing_replicas=tuple(r for r in original if r not in target),
            step=STEP_A2,
            started_ms=batch.now_ms,
        )
        started = (
            partition_change(batch, current)
            .set_replicas(tuple(dict.fromkeys((*target, *original))))
            .set_reassignment(moving)
            .bump_leader_epoch()
            .build()
        )
        assert started is not None  # the leader epoch grows
        return started

    def _start(
        self, batch: Batch, current: PartitionValue, target: tuple[int, ...], slots: _Slots
    ) -> None:
        started = self._started(batch, current, target)
        self._move_replica_states(batch, current, started)
        if batch.put_partition(started) and not self.advance(batch, started):
            slots.active += 1

    def _queue(
        self, batch: Batch, current: PartitionValue, target: tuple[int, ...], since_ms: int
    ) -> None:
        original = current.replicas
        moving = Reassignment(
            original_replicas=original,
            target_replicas=target,
            adding_replicas=tuple(r for r in target if r not in original),
            removing_replicas=tuple(r for r in original if r not in target),
            step=STEP_QUEUED,
            started_ms=since_ms,
        )
        partition_change(batch, current).set_reassignment(moving).put()

    def advance(self, batch: Batch, current: PartitionValue) -> bool:
        """Take a moving partition as far as it can go now; ``True`` once it completed."""
        moving = current.reassignment
        if moving is None or moving.step == STEP_QUEUED:
            return moving is None
        if self.partitions.is_deleting(batch, current.topic):
            return False
        target = moving.target_replicas
        if moving.step == STEP_A2 and not set(target).issubset(current.isr):
            return False  # phase B: wait for the target replicas to join the ISR
        live = batch.live()
        if current.leader not in target or current.leader not in live:
            change = partition_change(batch, current).set_reassignment(_step(moving, STEP_B3))
            if not change.elect_reassigned(target, live):
                return False
            current = change.put()
        removing = moving.removing_replicas
        key = (current.topic, current.partition)
        self.replica_states.transition(
            *key, removing, ReplicaState.OFFLINE, value=current, live=live
        )
        isr = tuple(r for r in current.isr if r not in removing)
        if isr != current.isr:
            change = partition_change(batch, current).set_isr(isr)
            current = change.set_reassignment(_step(moving, STEP_B4)).put()
        for state in _REMOVAL[1:]:  # B5
            self.replica_states.transition(*key, removing, state, value=current, live=live)
        partition_change(batch, current).set_replicas(target).set_reassignment(None).put()  # B6
        return True

    def _retargeted(
        self, batch: Batch, current: PartitionValue, target: tuple[int, ...] | None
    ) -> PartitionValue:
        """A moving partition restarted towards ``target`` from its original replicas, or
        (``None`` or the original replicas) reverted to them. Not recorded."""
        moving = current.reassignment
        assert moving is not None
        original = moving.original_replicas
        if target == original:
            target = None
        replicas = original if target is None else tuple(dict.fromkeys((*target, *original)))
        name = f"{current.topic}-{current.partition}"
        isr = tuple(r for r in current.isr if r in replicas)
        if not isr:
            raise ProtocolError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"cannot move {name} back to replicas {list(replicas)}: none of them is in "
                f"the ISR {list(current.isr)}",
            )
        leader = current.leader
        if leader < 0 or leader not in replicas:
            chosen = offline_leader(replicas, isr, batch.live(), unclean=False)
            leader = NO_LEADER if chosen is None else chosen
        restarted = None
        if target is not None:
            restarted = Reassignment(
                original_replicas=original,
                target_replicas=target,
                adding_replicas=tuple(r for r in target if r not in original),
                removing_replicas=tuple(r for r in original if r not in target),
                step=STEP_A2,
                started_ms=batch.now_ms,
            )
        value = (
            partition_change(batch, current)
            .set_leader(leader, Election.REASSIGNED)
            .set_isr(isr)
            .set_replicas(replicas)
            .set_reassignment(restarted)
            .bump_leader_epoch()
            .build()
        )
        assert value is not None  # the leader epoch grows
        return value

    def _cancel(self, batch: Batch, current: PartitionValue, slots: _Slots) -> None:
        moving = current.reassignment
        assert moving is not None
        if moving.step == STEP_QUEUED:
            partition_change(batch, current).set_reassignment(None).put()
            return
        reverted = self._retargeted(batch, current, None)
        self._move_replica_states(batch, current, reverted)
        batch.put_partition(reverted)
        slots.active -= 1

    def _move_replica_states(self, batch: Batch, old: PartitionValue, new: PartitionValue) -> None:
        """Replicas that leave go through deletion; replicas that arrive start as New."""
        key = (old.topic, old.partition)
        live = batch.live()
        gone = [r for r in old.replicas if r not in new.replicas]
        for state in _REMOVAL:
            self.replica_states.transition(*key, gone, state, value=old, live=live)
        arrived = [r for r in new.replicas if r not in old.replicas]
        self.replica_states.transition(*key, arrived, ReplicaState.NEW, value=old, live=live)

    # -- progress ------------------------------------------------------------------------------

    def _scan(self, batch: Batch) -> tuple[int, list[PartitionValue]]:
        """Partitions moving now, and the queued ones oldest first."""
        keys: set[TP] = set(batch.image.reassigning())
        keys.update(batch.reassign_keys)
        active = 0
        queued: list[PartitionValue] = []
        for topic, partition in keys:
            current = batch.partition(topic, partition)
            if current is None or current.reassignment is None:
                continue
            if current.reassignment.step == STEP_QUEUED:
                if not self.partitions.is_deleting(batch, topic):
                    queued.append(current)
            else:
                active += 1
        queued.sort(key=lambda v: (v.reassignment.started_ms, v.topic, v.partition))  # type: ignore[union-attr]
        return active, queued

    def settle(self, batch: Batch) -> None:
        """Advance every partition this batch touched, then start queued ones in free slots.

        Slots only free up (and the queue only grows) through changes to partitions being
        reassigned, so a batch that touched none (a heartbeat, say) costs nothing here.
        """
        if not batch.reassign_keys:
            return
        for topic, partition in list(batch.reassign_keys):
            current = batch.partition(topic, partition)
            if current is not None and current.reassignment is not None:
                self.advance(batch, current)
        self.start_queued(batch)

    def start_queued(self, batch: Batch) -> None:
        active, queued = self._scan(batch)
        slots = _Slots(active)
        for current in queued:
            if slots.active >= self.config.max_concurrent_reassignments:
                return
            moving = current.reassignment
            assert moving is not None
            # Queued, its replicas are still the original ones.
            started = self._started(batch, current, moving.target_replicas)
            self._move_replica_states(batch, current, started)
            if batch.put_partition(started) and not self.advance(batch, started):
                slots.active += 1

    def resume(self, batch: Batch) -> None:
        """After a failover: continue every reassignment from its persisted step."""
        for topic, partition in sorted(batch.image.reassigning()):
            current = batch.partition(topic, partition)
            if current is not None and current.reassignment is not None:
                self.advance(batch, current)
        self.start_queued(batch)


def _step(moving: Reassignment, step: str) -> Reassignment:
    return Reassignment(
        original_replicas=moving.original_replicas,
        target_replicas=moving.target_replicas,
        adding_replicas=moving.adding_replicas,
        removing_replicas=moving.removing_replicas,
        step=step,
        started_ms=moving.started_ms,
    )
