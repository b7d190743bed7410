"""The records one handler emits, and the state they lead to.

Handlers never change the image: the runtime replays their records after they return.
A :class:`Batch` collects the records and overlays them on the image, so a handler that
changes the same key several times (a reassignment's steps, two fencings in one timer
run) computes each change from the previous one.

Every record a batch holds carries its controller epoch (docs/architecture.md#controller-epoch),
and the batch alone puts it there: values reach its ``put_*`` methods with
:data:`~.records.EPOCH_FROM_BATCH` and are stamped with :attr:`Batch.epoch`; a value that
carries another epoch is refused with a ``ValueError``.

Every decision also carries its cause (docs/architecture.md#causes): the code that
decides names it (:meth:`Batch.because`): a new decision's trigger, written once as a
decision record before the first record it explains, or an earlier decision. Partition
values are built with the decision's id, and a partition value without a cause is
refused; a node value takes the decision's id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Final, TypeAlias

from kafkacoord.codecs.models import (
    DecisionKey,
    DecisionValue,
    NodeValue,
    PartitionKey,
    PartitionValue,
    RebalanceValue,
    TopicKey,
    TopicValue,
    Trigger,
)
from kafkacoord.coordinator.runtime.shard import Record

from .image import TP, MetadataImage, is_live_node
from .records import (
    EPOCH_FROM_BATCH,
    controller_record,
    node_record,
    partition_record,
    partition_tombstone,
    rebalance_record,
    topic_record,
    topic_tombstone,
)
from .states import PartitionPhase, check_partition_transition, partition_phase

__all__ = ["Batch", "DecisionCounter"]


class DecisionCounter:
    """A controller's count of its decisions in its epoch: a decision's id is the epoch and
    this count. A handler that fails puts it back (:attr:`next`), so a retry makes the
    same ids."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        sequence = self.next
        self.next = sequence + 1
        return sequence


_MISSING = object()

Stamped: TypeAlias = NodeValue | TopicValue | PartitionValue | RebalanceValue
"""The values that carry the epoch of the controller that wrote them."""

# Stamping sets the field on the value rather than copying it: a value reaches a batch
# fresh from its builder, seen by nothing else, and a failover puts hundreds of thousands.
_set_field: Final = object.__setattr__


def _named(value: Stamped) -> str:
    if isinstance(value, PartitionValue):
        return f"partition {value.topic}-{value.partition}"
    if isinstance(value, NodeValue):
        return f"node {value.node_id}"
    if isinstance(value, TopicValue):
        return f"topic {value.name!r}"
    return f"rebalance {value.proposal_id}"


class Batch:
    """The records of one handler run, overlaid on the image: reads see pending changes first."""

    __slots__ = (
        "_last_written",
        "_live",
        "_nodes",
        "_partitions",
        "_rebalance",
        "_sequence",
        "_topics",
        "_unwritten",
        "after_commit",
        "decision",
        "elr_min_isr",
        "epoch",
        "image",
        "now_ms",
        "reassign_keys",
        "records",
        "trigger",
    )

    def __init__(
        self,
        image: MetadataImage,
        epoch: int,
        now_ms: int,
        *,
        elr_min_isr: int | None = None,
        decisions: DecisionCounter | None = None,
    ) -> None:
        if epoch < 0:
            raise ValueError(f"a batch writes with a controller's epoch, not {epoch}")
        self.image = image
        self.epoch = epoch
        self.now_ms = now_ms
        # Eligible leader replicas on: the default min.insync.replicas; None: off.
        self.elr_min_isr = elr_min_isr
        self.records: list[Record] = []
        # Soft-state changes that must wait until the records are durable.
        self.after_commit: list[Callable[[], None]] = []
        self._nodes: dict[int, NodeValue] = {}
        self._topics: dict[str, TopicValue | None] = {}
        self._partitions: dict[TP, PartitionValue | None] = {}
        self._live: frozenset[int] | None = None
        self._rebalance: RebalanceValue | None = None
        # Partitions changed here that are (or were) being reassigned.
        self.reassign_keys: dict[TP, None] = {}
        # The decision the records being written now belong to, and its trigger when it
        # is this batch's own (None: an earlier decision's).
        self.decision: DecisionKey | None = None
        self.trigger: Trigger | None = None
        # The controller's count of its decisions (its epoch's), which ids are made of.
        self._sequence = decisions if decisions is not None else DecisionCounter()
        # Decision records not yet written: each goes before the first record it explains.
        self._unwritten: dict[DecisionKey, Record] = {}
        self._last_written: DecisionKey | None = None

    # -- causes ------------------------------------------------------------------------------

    @contextmanager
    def because(self, cause: Trigger | DecisionKey) -> Iterator[None]:
        """The records written inside belong to ``cause``: a new decision of this trigger,
        or an earlier decision (a fencing's ISR shrinks, or a fencing a new controller
        finishes). A new decision takes its id when first asked for it
        (:meth:`require_decision`) and its record is written before the first record it
        explains; one that wrote nothing gives its id back, so ids do not depend on the
        decisions that changed nothing. The outer decision applies again after."""
        outer = self.decision, self.trigger
        if isinstance(cause, DecisionKey):
            self.decision, self.trigger = cause, None
        else:
            self.decision, self.trigger = None, cause
        try:
            yield
        finally:
            decision = self.decision
            if self.trigger is not None and decision is not None:
                sequence = self._sequence
                if decision in self._unwritten and sequence.next == decision.sequence + 1:
                    del self._unwritten[decision]
                    sequence.next = decision.sequence
            self.decision, self.trigger = outer

    def require_decision(self) -> DecisionKey:
        """The decision of the records being written; a ``ValueError`` when none was set,
        so a path that changes a partition without saying why fails where it is."""
        decision = self.decision
        if decision is None:
            trigger = self.trigger
            if trigger is None:
                raise ValueError("a partition change needs a cause: set one with Batch.because")
            decision = self.decision = DecisionKey(self.epoch, self._sequence.take())
            self._unwritten[decision] = Record(
                decision, DecisionValue(trigger, self.now_ms, self.epoch)
            )
        return decision

    def _write_decision(self, decision: DecisionKey) -> None:
        # Called per partition record: the decision just written costs a compare.
        if decision is not self._last_written:
            record = self._unwritten.pop(decision, None)
            if record is not None:
                self.records.append(record)
            self._last_written = decision

    # -- savepoints ------------------------------------------------------------------------------

    def mark(self) -> tuple[int, int, dict[TP, None]]:
        """A savepoint to :meth:`rollback` to: cheap, as the controller's timers take one
        per timer."""
        return len(self.records), len(self.after_commit), dict(self.reassign_keys)

    def rollback(self, mark: tuple[int, int, dict[TP, None]]) -> None:
        """Forget what was written since ``mark``: the overlay is rebuilt from the records
        kept (a failure is rare, so only it pays)."""
        records, after, reassign = mark
        for record in self.records[records:]:
            if isinstance(record.key, DecisionKey) and record.value is not None:
                # Written again if needed again (a tombstone is not).
                self._unwritten[record.key] = record
        self._last_written = None
        kept = self.records[:records]
        del self.after_commit[after:]
        self.records = []
        self._nodes, self._topics, self._partitions = {}, {}, {}
        self._live, self._rebalance = None, None
        for record in kept:
            value, key = record.value, record.key
            if isinstance(value, NodeValue):
                self._nodes[value.node_id] = value
            elif isinstance(value, TopicValue):
                self._topics[value.name] = value
            elif isinstance(value, PartitionValue):
                self._partitions[(value.topic, value.partition)] = value
            elif isinstance(value, RebalanceValue):
                self._rebalance = value
            elif isinstance(key, TopicKey):
                self._topics[key.name] = None
            elif isinstance(key, PartitionKey):
                self._partitions[(key.topic, key.partition)] = None
        self.records = kept
        self.reassign_keys = dict(reassign)  # the mark stays as it was, for another rollback

    # -- reads (pending first, then the image) -----------------------------------------------

    def node(self, node_id: int) -> NodeValue | None:
        pending = self._nodes.get(node_id)
        return pending if pending is not None else self.image.nodes.get(node_id)

    def nodes(self) -> dict[int, NodeValue]:
        return {**self.image.nodes, **self._nodes}

    def live(self) -> frozenset[int]:
        """Nodes that may lead and join ISRs, pending node records included."""
        if not self._nodes:
            return self.image.live_nodes()
        if self._live is None:
            self._live = frozenset(n for n, v in self.nodes().items() if is_live_node(v))
        return self._live

    def rebalance(self) -> RebalanceValue | None:
        """The running or last rebalance, as this batch left it."""
        return self._rebalance if self._rebalance is not None else self.image.rebalance

    def topic(self, name: str) -> TopicValue | None:
        pending = self._topics.get(name, _MISSING)
        if pending is not _MISSING:
            return pending  # type: ignore[return-value]
        return self.image.topics.get(name)

    def topic_names(self) -> list[str]:
        names = set(self.image.topics) | set(self._topics)
        return sorted(n for n in names if self.topic(n) is not None)

    def partition(self, topic: str, partition: int) -> PartitionValue | None:
        if self._partitions:
            pending = self._partitions.get((topic, partition), _MISSING)
            if pending is not _MISSING:
                return pending  # type: ignore[return-value]
        return self.image.partition(topic, partition)

    def has_pending_partitions(self) -> bool:
        return bool(self._partitions)

    def pending_partitions(self) -> Iterable[tuple[TP, PartitionValue | None]]:
        return self._partitions.items()

    def node_partitions(
        self, node_id: int, *, lead: bool = False, isr: bool = False, replica: bool = False
    ) -> list[TP]:
        """Partitions the node may lead / be in the ISR of / hold, pending changes included.

        A superset: callers re-check each partition's current value.
        """
        image = self.image
        keys: dict[TP, None] = {}
        if isr:
            keys.update(dict.fromkeys(image.in_isr_of(node_id)))
        if lead:
            keys.update(dict.fromkeys(image.led_by(node_id)))
        if replica:
            keys.update(dict.fromkeys(image.replicas_on(node_id)))
        for key, value in self._partitions.items():
            if value is not None and (
                (lead and value.leader == node_id)
                or (isr and node_id in value.isr)
                or (replica and node_id in value.replicas)
            ):
                keys[key] = None
        return list(keys)

    # -- writes ---------------------------------------------------------------------------------

    def _stamp(self, value: Stamped) -> None:
        """Stamp ``value`` with this batch's controller epoch; refuse one that carries
        another."""
        stamped = value.controller_epoch
        if stamped == self.epoch:
            return
        if stamped != EPOCH_FROM_BATCH:
            raise ValueError(
                f"{_named(value)} carries controller epoch {stamped}, but this batch writes "
                f"epoch {self.epoch}: a record takes its epoch from the batch it is put in"
            )
        _set_field(value, "controller_epoch", self.epoch)

    def put_controller(self, node_id: int, incarnation: str, endpoint: str | None) -> None:
        """The controller record that claims this batch's epoch: the first record a
        controller writes once loaded."""
        self.records.append(
            controller_record(self.epoch, node_id, incarnation, self.now_ms, endpoint)
        )

    def put_node(self, value: NodeValue) -> None:
        self._stamp(value)
        if self.decision is not None or self.trigger is not None:  # like the epoch
            decision = self.require_decision()
            self._write_decision(decision)
            _set_field(value, "decision", decision)
        self._nodes[value.node_id] = value
        self._live = None
        self.records.append(node_record(value))

    def put_rebalance(self, value: RebalanceValue) -> None:
        self._stamp(value)
        self._rebalance = value
        self.records.append(rebalance_record(value))

    def put_topic(self, value: TopicValue) -> None:
        self._stamp(value)
        self._topics[value.name] = value
        self.records.append(topic_record(value))

    def delete_topic(self, name: str) -> None:
        self._topics[name] = None
        self.records.append(topic_tombstone(name))

    def put_partition(self, value: PartitionValue, *, via: PartitionPhase | None = None) -> bool:
        """Record a partition's new value; an invalid state transition is logged, not applied.

        ``via`` names a state passed through on the way (NonExistent -> New -> Online).
        """
        cause = value.cause
        if cause is None:
            raise ValueError(f"{_named(value)} has no cause: every partition change says why")
        key = (value.topic, value.partition)
        old = self.partition(value.topic, value.partition)
        if old is None or old.state is not value.state:
            source = partition_phase(old)
            target = partition_phase(value)
            steps = [(source, target)] if via is None else [(source, via), (via, target)]
            for a, b in steps:
                # Staying in a state is no transition (a partition created NEW stays NEW).
                if a is not b and not check_partition_transition(
                    value.topic, value.partition, a, b
                ):
                    return False
        self._stamp(value)
        self._write_decision(cause.decision)
        self._partitions[key] = value
        if value.reassignment is not None or (old is not None and old.reassignment is not None):
            self.reassign_keys[key] = None
        self.records.append(partition_record(value))
        return True

    def put_existing_partitions(self, values: list[PartitionValue]) -> None:
        """Record new values of existing partitions that are ONLINE or OFFLINE: valid from any
        existing state, so no transition check (the bulk path of a failover)."""
        partitions, records, moving = self._partitions, self.records, self.reassign_keys
        epoch = self.epoch
        # :meth:`_stamp` and :func:`.records.partition_record` inline: a failover puts
        # hundreds of thousands.
        write_decision = self._write_decision
        for value in values:
            cause = value.cause
            if cause is None:
                raise ValueError(f"{_named(value)} has no cause: every partition change says why")
            write_decision(cause.decision)
            stamped = value.controller_epoch
            if stamped == EPOCH_FROM_BATCH:
                _set_field(value, "controller_epoch", epoch)
            elif stamped != epoch:
                self._stamp(value)  # refuses it
            topic, partition = value.topic, value.partition
            key = (topic, partition)
            partitions[key] = value
            if value.reassignment is not None:
                moving[key] = None
            records.append(Record(PartitionKey(topic, partition), value))

    def delete_decision(self, decision: DecisionKey) -> None:
        """Tombstone a decision record past its retention."""
        self.records.append(Record(decision, None))

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Tombstone a partition: valid only from OFFLINE (Kafka's Offline -> NonExistent)."""
        old = self.partition(topic, partition)
        if not check_partition_transition(
            topic, partition, partition_phase(old), PartitionPhase.NON_EXISTENT
        ):
            return False
        key = (topic, partition)
        self._partitions[key] = None
        self.reassign_keys.pop(key, None)
        self.records.append(partition_tombstone(topic, partition))
        return True
