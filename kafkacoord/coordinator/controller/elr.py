"""Eligible Leader Replicas (KIP-966): clean leaders after the ISR shrank below min ISR.

A write is committed once ``min.insync.replicas`` replicas have it. So when the ISR
shrinks below that size, the replicas leaving it still hold every committed record:
they enter the partition's ELR, and may lead again without an unclean election.

- The ISR may now shrink to nothing: its last member moves to the ELR.
- Once the ISR is back at min ISR or above, the ELR is cleared (the high watermark moves
  on without its members).
- A member that rejoins the ISR, or stops being a replica, leaves the ELR; so does a
  node back from an unclean shutdown (it may have lost its tail).
- When ISR and ELR are both empty, the last leader is kept as ``last_known_elr``.

Election order for a leaderless partition (:func:`~.election.offline_election`): a live
ISR member, then a live ELR member, then the last known leader if it is live, and only
then, if the topic allows it, an unclean choice.
"""

from __future__ import annotations

from kafkacoord.codecs.models import PartitionValue

__all__ = ["next_elr", "without_replica"]

Ids = tuple[int, ...]


def next_elr(old: PartitionValue, replicas: Ids, isr: Ids, min_isr: int) -> tuple[Ids, Ids]:
    """The ELR and last known ELR once ``old`` gets ``replicas`` and ``isr``."""
    if len(isr) >= min_isr:
        return (), ()
    members = frozenset(isr)
    assigned = frozenset(replicas)
    elr = [r for r in old.elr if r not in members and r in assigned]
    elr += [r for r in old.isr if r not in members and r in assigned and r not in elr]
    if isr or elr:
        return tuple(elr), ()
    if old.last_known_elr:
        return (), tuple(r for r in old.last_known_elr if r in assigned)
    # Both empty now: remember who led last (or, leaderless already, who was eligible).
    last = [old.leader] if old.leader >= 0 else []
    last += [r for r in (*old.elr, *old.isr) if r not in last]
    return (), tuple(r for r in last if r in assigned)


def without_replica(elr: Ids, last_known: Ids, isr: Ids, node_id: int) -> tuple[Ids, Ids] | None:
    """ELR and last known ELR without a node that came back from an unclean shutdown (Kafka's
    ``uncleanShutdownReplicas``), or ``None`` when it is in neither."""
    if node_id not in elr and node_id not in last_known:
        return None
    kept = tuple(r for r in elr if r != node_id)
    last = tuple(r for r in last_known if r != node_id)
    if not kept and not isr and not last and node_id in elr:
        # The last eligible replica is gone: it is still the last known one.
        last = (node_id,)
    return kept, last
