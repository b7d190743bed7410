"""Building a partition's next record (Kafka's PartitionChangeBuilder, reduced).

Epoch rules (docs/architecture.md#epochs-and-isr): the leader epoch grows on every leader
change (and when a reassignment starts, Kafka's reassignment step A1); the partition epoch
grows on every change of leader, ISR, replicas, state or ELR. A change that changes
nothing yields no record. With ELR on, every change keeps the ELR (:mod:`.elr`).
"""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import PartitionState, PartitionValue, Reassignment

from .batch import Batch
from .elr import next_elr

__all__ = [
    "KEEP",
    "NO_LEADER",
    "Election",
    "apply_change",
    "next_value",
]

NO_LEADER: Final = -1


class Election:
    """Values of ``PartitionValue.election``: how the current leader was chosen."""

    INITIAL: Final = "initial"
    OFFLINE: Final = "offline"
    UNCLEAN: Final = "unclean"
    REASSIGNED: Final = "reassigned"
    PREFERRED: Final = "preferred"
    CONTROLLED_SHUTDOWN: Final = "controlled_shutdown"
    ELR: Final = "elr"
    LAST_KNOWN: Final = "last_known_leader"


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()
"""Leave the reassignment field as it is."""


def next_value(
    batch: Batch,
    old: PartitionValue,
    *,
    leader: int | None = None,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    state: PartitionState | None = None,
    reassignment: Reassignment | _Keep | None = KEEP,
    election: str | None = None,
    bump_leader_epoch: bool = False,
) -> PartitionValue | None:
    """``old`` with the given fields changed, epochs bumped; ``None`` if nothing changes.

    Without an explicit ``state``: ONLINE with a leader, else NEW if the partition never
    had one, else OFFLINE.
    """
    new_leader = old.leader if leader is None else leader
    new_isr = old.isr if isr is None else isr
    new_replicas = old.replicas if replicas is None else replicas
    if state is None:
        if new_leader >= 0:
            state = PartitionState.ONLINE
        elif old.state is PartitionState.NEW:
            state = PartitionState.NEW
        else:
            state = PartitionState.OFFLINE
    new_reassignment = old.reassignment if isinstance(reassignment, _Keep) else reassignment
    leader_changed = new_leader != old.leader
    elr, last_known = old.elr, old.last_known_elr
    if batch.elr_min_isr is not None:
        min_isr = batch.image.min_insync_replicas(old.topic, batch.elr_min_isr)
        elr, last_known = next_elr(old, new_replicas, new_isr, min_isr)
    changed = (
        leader_changed
        or bump_leader_epoch
        or new_isr != old.isr
        or new_replicas != old.replicas
        or state is not old.state
        or elr != old.elr
        or last_known != old.last_known_elr
    )
    if not changed and new_reassignment == old.reassignment:
        return None
    return PartitionValue(
        old.topic,
        old.partition,
        state,
        new_replicas,
        new_isr,
        new_leader,
        old.leader_epoch + 1 if leader_changed or bump_leader_epoch else old.leader_epoch,
        old.partition_epoch + 1 if changed else old.partition_epoch,
        batch.now_ms,
        batch.epoch,
        new_reassignment,
        (election or old.election) if leader_changed else old.election,
        elr,
        last_known,
    )


def apply_change(
    batch: Batch,
    old: PartitionValue,
    *,
    leader: int | None = None,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    state: PartitionState | None = None,
    reassignment: Reassignment | _Keep | None = KEEP,
    election: str | None = None,
    bump_leader_epoch: bool = False,
) -> PartitionValue:
    """:func:`next_value`, recorded in ``batch``; returns the partition's value afterwards
    (``old`` when nothing changed or the transition was invalid)."""
    new = next_value(
        batch, old, leader=leader, isr=isr, replicas=replicas, state=state,
        reassignment=reassignment, election=election, bump_leader_epoch=bump_leader_epoch,
    )  # fmt: skip
    if new is None or not batch.put_partition(new):
        return old
    return new
