"""Every change to a partition, built in one place (Kafka's ``PartitionChangeBuilder``).

A :class:`PartitionChangeBuilder` starts from a partition's current value, takes the
changes asked for (ISR, replicas, leader, state, the reassignment in flight, a replica
back from an unclean shutdown, an ELR to clear) and the elections to run, and builds the
partition's next value. The rules (docs/architecture.md#epochs-and-isr) live here alone:

- Elections follow :mod:`.election` over the ISR and replicas as changed so far; the
  eligible leader replicas an election may draw on are those that ISR leaves (KIP-966).
- The leader epoch grows when the leader changes, and when a reassignment starts
  (Kafka's step A1: :meth:`~PartitionChangeBuilder.bump_leader_epoch`), never otherwise.
- The partition epoch grows with every change a replica acts on: leader, ISR, replicas,
  state, ELR or last known ELR, so whenever the leader epoch grows. The reassignment's
  own bookkeeping alone (a move queued, or a queued one dropped) is recorded without it:
  no replica sees anything change.
- With eligible leader replicas on, the ELR and last known ELR follow from the new ISR
  (:func:`.elr.next_elr`); with them off they stay as they are.
- A change that changes nothing builds nothing, and nothing is written.
- Every value built carries its :class:`~kafkacoord.codecs.models.Cause`
  (docs/architecture.md#causes): the decision's id and, when a leader was elected (or
  none could be), the rule that chose it.

The value built is the partition's whole record, never a delta: Kafka's
``PartitionChangeRecord`` carries only the fields that changed, but compaction keeps only
a key's last record (docs/architecture.md#compaction-rules), so here the smallest change
is the new value, and none at all when nothing changed. Values leave the builder with
no controller epoch yet (:data:`.records.EPOCH_FROM_BATCH`): the :class:`~.batch.Batch`
they are put in stamps its own.

:func:`fence_node` is the fast path of one change, a node fenced, over every partition
the node leads or follows in: a failover's hundreds of thousands. It is
:meth:`PartitionChangeBuilder.fence_replica` written out with one constructor call per
partition and no builder; ``tests/unit/controller/test_partition_change.py`` holds the
two equal.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final, Self

from kafkacoord.codecs.models import (
    Cause,
    DecisionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
)

from .batch import Batch
from .election import (
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassigned_leader,
)
from .elr import next_elr, without_replica
from .records import EPOCH_FROM_BATCH
from .states import PartitionPhase

__all__ = [
    "NO_CANDIDATE",
    "NO_LEADER",
    "Election",
    "PartitionChangeBuilder",
    "fence_node",
    "new_partition",
    "partition_change",
    "put_new_partition",
]

NO_LEADER: Final = -1
NO_CANDIDATE: Final = "none"
"""The rule of a cause whose election found no replica to lead."""

Ids = tuple[int, ...]


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


# Where an offline election found its leader -> the kind recorded with it.
_ELECTION_KIND: Final = {
    "isr": Election.OFFLINE,
    "elr": Election.ELR,
    "last_known": Election.LAST_KNOWN,
    "unclean": Election.UNCLEAN,
}


def _first_election(replicas: Ids, live: Collection[int]) -> Ids:
    """A new partition's first ISR: its live replicas, the first of which leads."""
    return tuple(r for r in replicas if r in live)


class PartitionChangeBuilder:
    """One partition's next value, from its current one and the changes asked for.

    The setters and elections return the builder, or whether an election found a leader;
    :meth:`build` applies the epoch rules and returns the new value, or ``None`` when
    nothing changed. ``min_isr`` is the topic's ``min.insync.replicas`` with eligible
    leader replicas on, ``None`` with them off. ``decision`` is the value's cause (``None``:
    no cause, which no batch takes). A builder made by :func:`partition_change` knows its
    batch and its decision, and :meth:`put` records the value there.
    """

    __slots__ = (
        "_batch",
        "_bump_leader_epoch",
        "_clear_elr",
        "_election",
        "_rule",
        "_unclean_shutdown",
        "current",
        "decision",
        "isr",
        "leader",
        "min_isr",
        "now_ms",
        "reassignment",
        "replicas",
        "state",
    )

    def __init__(
        self,
        current: PartitionValue,
        *,
        now_ms: int,
        min_isr: int | None = None,
        batch: Batch | None = None,
        decision: DecisionKey | None = None,
    ) -> None:
        self.current = current
        self.decision = decision
        self.now_ms = now_ms
        self.min_isr = min_isr
        # The targets, as changed so far.
        self.isr: Ids = current.isr
        self.replicas: Ids = current.replicas
        self.leader: int = current.leader
        self.reassignment: Reassignment | None = current.reassignment
        # None: ONLINE with a leader, else NEW if it never had one, else OFFLINE.
        self.state: PartitionState | None = None
        self._election: str | None = None
        self._bump_leader_epoch = False
        self._clear_elr = False
        self._unclean_shutdown: int | None = None
        self._batch = batch
        # The last election's rule, for the cause.
        self._rule = ""

    # -- the changes asked for -----------------------------------------------------------

    def set_isr(self, isr: Ids) -> Self:
        self.isr = isr
        return self

    def set_replicas(self, replicas: Ids) -> Self:
        self.replicas = replicas
        return self

    def set_leader(self, leader: int, election: str | None = None) -> Self:
        """An explicit leader; ``election`` is recorded with it if it is a new one, and is
        the cause's rule (:data:`NO_CANDIDATE` for no leader)."""
        self.leader = leader
        if election is not None:
            self._election = election
            self._rule = election if leader >= 0 else NO_CANDIDATE
        return self

    def set_state(self, state: PartitionState) -> Self:
        self.state = state
        return self

    def set_reassignment(self, reassignment: Reassignment | None) -> Self:
        self.reassignment = reassignment
        return self

    def bump_leader_epoch(self) -> Self:
        """Bump the leader epoch even if the leader stays: a reassignment starting (Kafka's
        step A1), so replicas on their way out stop following this epoch's leader."""
        self._bump_leader_epoch = True
        return self

    def clear_elr(self) -> Self:
        """Drop the ELR and last known ELR: judged against a ``min.insync.replicas`` that
        changed, they may no longer hold every committed record (KIP-966)."""
        self._clear_elr = True
        return self

    def remove_unclean_replica(self, node_id: int) -> Self:
        """The node came back from an unclean shutdown (Kafka's
        ``uncleanShutdownReplicas``): its log may have lost its tail, so it leaves the ELR;
        it stays the last known leader if it was the last eligible replica."""
        self._unclean_shutdown = node_id
        return self

    def fence_replica(self, node_id: int, live: Collection[int], *, unclean: bool) -> Self:
        """The node is fenced: it leaves the ISR and, if it led, an offline election picks
        the next leader (none: the partition goes OFFLINE).

        Without eligible leader replicas the ISR never shrinks to nothing: its last member
        stays, so it can come back as a clean leader; with them it becomes eligible.
        """
        isr = self.isr
        if node_id in isr and (len(isr) > 1 or self.min_isr is not None):
            self.isr = tuple(r for r in isr if r != node_id)
        if self.leader == node_id and not self.elect_offline(live, unclean=unclean):
            self.set_leader(NO_LEADER, Election.OFFLINE)
        return self

    # -- elections (docs/architecture.md#leader-election) --------------------------------

    def eligible(self) -> tuple[Ids, Ids]:
        """The ELR and last known ELR the ISR as changed so far leaves."""
        current = self.current
        if self.min_isr is None:
            return current.elr, current.last_known_elr
        return next_elr(current, self.replicas, self.isr, self.min_isr)

    def elect_offline(self, live: Collection[int], *, unclean: bool) -> bool:
        """Kafka's offline election: a live ISR member, else a live eligible replica, else
        the last known leader if live, else (``unclean``) the first live replica; the ISR
        becomes the live members, or just an ELR, last known or unclean leader.

        A NEW partition's first election instead: the first live replica leads, the live
        replicas form the ISR. ``False`` (and nothing changed) when no replica can lead.
        """
        if self.current.state is PartitionState.NEW:
            alive = _first_election(self.replicas, live)
            if not alive:
                return False
            self.isr = alive
            self.set_leader(alive[0], Election.INITIAL)
            return True
        elr, last = self.eligible()
        result = offline_election(self.replicas, self.isr, live, unclean=unclean, elr=elr,
                                  last_known=last)  # fmt: skip
        if result is None:
            return False
        self.isr = result.isr
        self.set_leader(result.leader, _ELECTION_KIND[result.via])
        return True

    def elect_preferred(self, live: Collection[int]) -> bool:
        """The first replica leads, if it is live and in the ISR; the ISR stays."""
        result = preferred_election(self.replicas, self.isr, live)
        if result is None:
            return False
        self.set_leader(result.leader, Election.PREFERRED)
        return True

    def elect_controlled_shutdown(self, live: Collection[int], node_id: int) -> bool:
        """Leadership moves off a shutting-down node to the first live ISR member that is
        not shutting down, and the node leaves the ISR."""
        isr = self.isr
        result = controlled_shutdown_election(self.replicas, isr, live, (node_id,))
        if result is None:
            return False
        self.isr = result.isr
        self.set_leader(result.leader, Election.CONTROLLED_SHUTDOWN)
        return True

    def elect_reassigned(self, target: Ids, live: Collection[int]) -> bool:
        """The first live ISR member of a reassignment's target replicas leads."""
        leader = reassigned_leader(target, self.isr, live)
        if leader is None:
            return False
        self.set_leader(leader, Election.REASSIGNED)
        return True

    # -- the new value ---------------------------------------------------------------------

    def build(self) -> PartitionValue | None:
        """The partition's next value, for a batch to stamp; ``None`` when nothing changes."""
        current = self.current
        leader, isr, replicas = self.leader, self.isr, self.replicas
        state = self.state
        if state is None:
            if leader >= 0:
                state = PartitionState.ONLINE
            elif current.state is PartitionState.NEW:
                state = PartitionState.NEW
            else:
                state = PartitionState.OFFLINE
        if self._clear_elr:
            elr: Ids = ()
            last: Ids = ()
        elif self.min_isr is None:
            elr, last = current.elr, current.last_known_elr
        else:
            elr, last = next_elr(current, replicas, isr, self.min_isr)
        if self._unclean_shutdown is not None:
            left = without_replica(elr, last, isr, self._unclean_shutdown)
            if left is not None:
                elr, last = left
        leader_changed = leader != current.leader
        new_leader_epoch = leader_changed or self._bump_leader_epoch
        changed = (
            new_leader_epoch
            or isr != current.isr
            or replicas != current.replicas
            or state is not current.state
            or elr != current.elr
            or last != current.last_known_elr
        )
        if not changed and self.reassignment == current.reassignment:
            return None
        decision = self.decision
        cause = None
        if decision is not None:
            elected = leader_changed or self._rule == NO_CANDIDATE
            cause = Cause(decision, self._rule if elected else "")
        return PartitionValue(
            current.topic, current.partition, state, replicas, isr, leader,
            current.leader_epoch + 1 if new_leader_epoch else current.leader_epoch,
            current.partition_epoch + 1 if changed else current.partition_epoch,
            self.now_ms, EPOCH_FROM_BATCH, self.reassignment,
            (self._election or current.election) if leader_changed else current.election,
            elr, last, cause,
        )  # fmt: skip

    def put(self) -> PartitionValue:
        """:meth:`build`, put in the builder's batch; the partition's value afterwards (the
        current one when nothing changed or the batch refused the state transition)."""
        batch = self._batch
        if batch is None:
            raise ValueError("this builder has no batch: make it with partition_change()")
        new = self.build()
        if new is None or not batch.put_partition(new):
            return self.current
        return new


def partition_change(batch: Batch, current: PartitionValue) -> PartitionChangeBuilder:
    """A builder for a change of ``current`` in ``batch``: the batch's time and decision
    (a ``ValueError`` without one), and the topic's ``min.insync.replicas`` when eligible
    leader replicas are on."""
    decision = batch.require_decision()
    default = batch.elr_min_isr
    min_isr = None if default is None else batch.image.min_insync_replicas(current.topic, default)
    return PartitionChangeBuilder(current, now_ms=batch.now_ms, min_isr=min_isr, batch=batch,
                                  decision=decision)  # fmt: skip


def new_partition(
    topic: str,
    partition: int,
    replicas: Ids,
    live: Collection[int],
    now_ms: int,
    *,
    decision: DecisionKey | None = None,
) -> PartitionValue:
    """A partition's first value, for a batch to stamp: ONLINE with its live replicas as the ISR and
    the first of them as leader, or NEW while none is live; both epochs start at 0. With a
    ``decision``, its cause: the initial election over the live replicas."""
    alive = _first_election(replicas, live)
    cause = None
    if decision is not None:
        cause = Cause(decision, Election.INITIAL if alive else NO_CANDIDATE)
    return PartitionValue(
        topic, partition, PartitionState.ONLINE if alive else PartitionState.NEW, replicas,
        alive, alive[0] if alive else NO_LEADER, 0, 0, now_ms, EPOCH_FROM_BATCH,
        election=Election.INITIAL if alive else "", cause=cause,
    )  # fmt: skip


def put_new_partition(batch: Batch, topic: str, partition: int, replicas: Ids) -> bool:
    """Create the partition in ``batch``: NonExistent -> New, then New -> Online when a
    replica is live, in one record."""
    value = new_partition(topic, partition, replicas, batch.live(), batch.now_ms,
                          decision=batch.require_decision())  # fmt: skip
    return batch.put_partition(value, via=PartitionPhase.NEW)


TopicPolicy = Callable[[str], tuple[bool, bool]]
"""topic -> (leave its partitions alone, unclean leader election enabled)."""


def fence_node(
    batch: Batch,
    node_id: int,
    topic_policy: TopicPolicy,
    *,
    leaders: bool = True,
    followers: bool = True,
    limit: int | None = None,
) -> bool:
    """:meth:`PartitionChangeBuilder.fence_replica` for every partition the node leads
    (``leaders``) or only follows in the ISR (``followers``), at most ``limit`` changed
    ones; ``True`` when the limit left some for later.

    The hot path of a failover: it visits only the node's partitions (image indexes),
    reads each topic's policy once, builds each new value with one constructor call, and
    puts them all at once. Every partition it changes exists and goes to ONLINE or OFFLINE,
    which Kafka's table allows from any existing state, so the values skip the per-record
    transition check.
    """
    decision = batch.require_decision()
    # The decision's causes, one per rule: shared by the values.
    quiet, causes = Cause(decision), {NO_CANDIDATE: Cause(decision, NO_CANDIDATE)}
    live = batch.live()
    now_ms, from_batch = batch.now_ms, EPOCH_FROM_BATCH
    pending = batch.has_pending_partitions()
    table = batch.image.partition_table()
    elr_default = batch.elr_min_isr
    min_isr_of = batch.image.min_insync_replicas
    # topic -> (leave alone, unclean, min ISR; None with eligible leader replicas off)
    policies: dict[str, tuple[bool, bool, int | None]] = {}
    changed: list[PartitionValue] = []
    more = False
    both = leaders and followers
    for topic, partition in batch.node_partitions(node_id, lead=leaders, isr=followers):
        if limit is not None and len(changed) >= limit:
            more = True
            break
        if pending:
            current = batch.partition(topic, partition)
        else:
            parts = table.get(topic)
            current = None if parts is None else parts.get(partition)
        if current is None:
            continue
        leads = current.leader == node_id
        if not both and leads is not leaders:
            continue  # the other half of a fencing
        policy = policies.get(topic)
        if policy is None:
            skip, unclean = topic_policy(topic)
            min_isr = None if elr_default is None else min_isr_of(topic, elr_default)
            policy = policies[topic] = (skip, unclean, min_isr)
        if policy[0]:
            continue
        min_isr = policy[2]
        replicas = current.replicas
        isr = current.isr
        if node_id in isr and (len(isr) > 1 or min_isr is not None):
            members = list(isr)
            members.remove(node_id)  # cheaper than a comprehension for a few replicas
            isr = tuple(members)
        if min_isr is None:
            elr, last = current.elr, current.last_known_elr
        elif len(isr) >= min_isr:  # next_elr's first rule, inline: the common case
            elr = last = ()
        else:
            elr, last = next_elr(current, replicas, isr, min_isr)
        if not leads:
            if isr is current.isr and elr == current.elr and last == current.last_known_elr:
                continue
            changed.append(
                PartitionValue(
                    topic, partition, current.state, replicas, isr, current.leader,
                    current.leader_epoch, current.partition_epoch + 1, now_ms, from_batch,
                    current.reassignment, current.election, elr, last,
                    quiet,
                )
            )  # fmt: skip
            continue
        result = offline_election(replicas, isr, live, unclean=policy[1], elr=elr,
                                  last_known=last)  # fmt: skip
        if result is None:
            state, leader, kind = PartitionState.OFFLINE, NO_LEADER, Election.OFFLINE
            cause = causes[NO_CANDIDATE]
        else:
            state, leader, isr = PartitionState.ONLINE, result.leader, result.isr
            kind = _ELECTION_KIND[result.via]
            cause = causes.get(kind) or causes.setdefault(kind, Cause(decision, kind))
            if min_isr is not None:
                full = len(isr) >= min_isr
                elr, last = ((), ()) if full else next_elr(current, replicas, isr, min_isr)
        changed.append(
            PartitionValue(
                topic, partition, state, replicas, isr, leader, current.leader_epoch + 1,
                current.partition_epoch + 1, now_ms, from_batch, current.reassignment, kind,
                elr, last, cause,
            )
        )  # fmt: skip
    batch.put_existing_partitions(changed)
    return more
