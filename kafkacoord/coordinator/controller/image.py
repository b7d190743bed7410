"""The replayed state of ``__kc_metadata``: controller, nodes, topics and partitions.

:class:`MetadataImage` is what ``replay`` builds, record by record, in the controller and
in every reader of the log (node agents, the CLI). It keeps indexes so that the work of
an event is proportional to what it touches: node -> partitions it leads, is in the ISR
of, or holds a replica of; leaderless partitions; partitions being reassigned.

Replay applies Kafka's StaleControllerEpoch rule through
:class:`~kafkacoord.codecs.fencing.ControllerEpochFence` (docs/architecture.md#controller-epoch):
a decision record whose ``controller_epoch`` is lower than the highest controller epoch seen
is ignored, as is a controller record with a lower epoch. Tombstones always apply.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Set
from typing import Any, TypeAlias

from kafkacoord.codecs.fencing import ControllerEpochFence, controller_epoch_of
from kafkacoord.codecs.models import (
    AvroModel,
    ControllerKey,
    ControllerValue,
    DecisionKey,
    DecisionValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionValue,
    RebalanceKey,
    RebalanceValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.runtime.shard import Record

from .config import MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION
from .leader_rebalance import leader_imbalance

__all__ = ["TP", "MetadataImage", "config_flag", "is_live_node"]

log = logging.getLogger(__name__)

TP: TypeAlias = tuple[str, int]
"""``(topic, partition)``."""


def is_live_node(node: NodeValue) -> bool:
    """Eligible to lead and to join ISRs: unfenced and not in controlled shutdown."""
    return not node.fenced and not node.shutting_down


def config_flag(configs: Mapping[str, str], name: str, default: bool) -> bool:
    raw = configs.get(name)
    return default if raw is None else raw.strip().lower() == "true"


def _index_add(index: dict[int, set[TP]], nodes: Any, key: TP) -> None:
    # Only nodes whose set exists: the others are scanned for when first asked.
    for node in nodes:
        bucket = index.get(node)
        if bucket is not None:
            bucket.add(key)


def _index_remove(index: dict[int, set[TP]], nodes: Any, key: TP) -> None:
    # Empty buckets stay: a node's bucket is reused as its partitions come and go.
    for node in nodes:
        bucket = index.get(node)
        if bucket is not None:
            bucket.discard(key)


class MetadataImage:
    """Controller, nodes, topics and partitions as replayed from the metadata log.

    Mutated only by :meth:`replay` / :meth:`apply`; everything else is a read-only query.
    Returned collections must not be modified by callers.
    """

    def __init__(self) -> None:
        self.controller: ControllerValue | None = None
        self.fence = ControllerEpochFence()
        self.nodes: dict[int, NodeValue] = {}
        self.topics: dict[str, TopicValue] = {}
        # The running or the last goal-based rebalance.
        self.rebalance: RebalanceValue | None = None
        # Live decision records, (controller epoch, sequence) -> when decided: all a
        # controller needs of them is which to tombstone once past their retention.
        self.decisions: dict[tuple[int, int], int] = {}
        self._partitions: dict[str, dict[int, PartitionValue]] = {}
        # node -> partitions it leads, follows in the ISR, holds. A node's set is built by
        # one scan the first time it is asked for, then kept up to date by replay: a load
        # would otherwise add to these seven times a partition, and a fencing asks for one
        # node (a scan of a million partitions takes 0.05 to 0.15 s).
        self._leads: dict[int, set[TP]] = {}
        self._in_isr: dict[int, set[TP]] = {}
        self._replicas: dict[int, set[TP]] = {}
        self._leaderless: set[TP] = set()
        self._reassigning: set[TP] = set()
        self._live: frozenset[int] | None = None
        self.ignored_stale = 0

    # -- replay -----------------------------------------------------------------------

    @property
    def controller_epoch(self) -> int:
        """The highest controller epoch seen (``-1`` before any controller record)."""
        return self.fence.epoch

    def replay(self, record: Record) -> bool:
        return self.apply(record.key, record.value)

    def apply(self, key: AvroModel, value: AvroModel | None) -> bool:
        """Apply one record; returns ``False`` when it was ignored as stale."""
        if not self.fence.admit(value):
            return self._stale(key, controller_epoch_of(value))
        if type(value) is PartitionValue:  # the common case first
            assert isinstance(key, PartitionKey)
            self._apply_partition(key.topic, key.partition, value)
            return True
        if isinstance(value, ControllerValue):
            self.controller = value
            return True
        if isinstance(key, PartitionKey):
            assert value is None
            self._apply_partition(key.topic, key.partition, None)
        elif isinstance(key, NodeKey):
            assert value is None or isinstance(value, NodeValue)
            self._live = None
            if value is None:
                self.nodes.pop(key.node_id, None)
            else:
                self.nodes[key.node_id] = value
        elif isinstance(key, TopicKey):
            assert value is None or isinstance(value, TopicValue)
            if value is None:
                self.topics.pop(key.name, None)
            else:
                self.topics[key.name] = value
        elif isinstance(key, RebalanceKey):
            assert value is None or isinstance(value, RebalanceValue)
            self.rebalance = value
        elif isinstance(key, DecisionKey):
            assert value is None or isinstance(value, DecisionValue)
            decision = (key.controller_epoch, key.sequence)
            if value is None:
                self.decisions.pop(decision, None)
            else:
                self.decisions[decision] = value.decided_ms
        elif isinstance(key, ControllerKey):
            # A tombstone of the controller record forgets who leads, not the epoch fence.
            if value is None:
                self.controller = None
        else:
            raise TypeError(f"not a metadata record key: {type(key).__name__}")
        return True

    def _stale(self, key: AvroModel, epoch: int) -> bool:
        self.ignored_stale += 1
        log.info(
            "ignored record %r of stale controller epoch %d (current %d)",
            key, epoch, self.controller_epoch,
        )  # fmt: skip
        return False

    def _apply_partition(self, topic: str, partition: int, new: PartitionValue | None) -> None:
        # Replayed for every partition record (a failover writes tens of thousands): keep
        # it to dict and set operations on the few nodes whose role changed.
        key = (topic, partition)
        parts = self._partitions.get(topic)
        old = None if parts is None else parts.get(partition)
        if new is None:
            if old is None:
                return
            assert parts is not None
            del parts[partition]
            if not parts:
                del self._partitions[topic]
            self._leaderless.discard(key)
            self._reassigning.discard(key)
            _index_remove(self._replicas, old.replicas, key)
            _index_remove(self._in_isr, old.isr, key)
            if old.leader >= 0:
                _index_remove(self._leads, (old.leader,), key)
            return
        if parts is None:
            self._partitions[topic] = parts = {}
        parts[partition] = new
        if old is None:
            if new.leader < 0:
                self._leaderless.add(key)
            if new.reassignment is not None:
                self._reassigning.add(key)
            if self._replicas:  # a load leaves these empty: skip the calls
                _index_add(self._replicas, new.replicas, key)
            if self._in_isr:
                _index_add(self._in_isr, new.isr, key)
            if self._leads and new.leader >= 0:
                _index_add(self._leads, (new.leader,), key)
            return
        if new.leader >= 0:
            self._leaderless.discard(key)
        else:
            self._leaderless.add(key)
        if new.reassignment is not None:
            self._reassigning.add(key)
        else:
            self._reassigning.discard(key)
        # Replica lists are short: tuple scans beat building sets.
        if old.replicas is not new.replicas and old.replicas != new.replicas:
            _index_remove(self._replicas, [r for r in old.replicas if r not in new.replicas], key)
            _index_add(self._replicas, [r for r in new.replicas if r not in old.replicas], key)
        if old.isr != new.isr and self._in_isr:
            _index_remove(self._in_isr, [r for r in old.isr if r not in new.isr], key)
            _index_add(self._in_isr, [r for r in new.isr if r not in old.isr], key)
        if old.leader != new.leader and self._leads:
            if old.leader >= 0:
                _index_remove(self._leads, (old.leader,), key)
            if new.leader >= 0:
                _index_add(self._leads, (new.leader,), key)

    def _scan(self, node_id: int, role: str) -> set[TP]:
        """The partitions ``node_id`` leads / follows in the ISR / holds, by one scan."""
        parts = self._partitions.items()
        if role == "leads":
            return {(t, p) for t, ps in parts for p, v in ps.items() if v.leader == node_id}
        if role == "isr":
            return {(t, p) for t, ps in parts for p, v in ps.items() if node_id in v.isr}
        return {(t, p) for t, ps in parts for p, v in ps.items() if node_id in v.replicas}

    # -- nodes ------------------------------------------------------------------------

    def node(self, node_id: int) -> NodeValue | None:
        return self.nodes.get(node_id)

    def live_nodes(self) -> frozenset[int]:
        """Nodes that may lead and join ISRs: unfenced and not shutting down."""
        if self._live is None:
            self._live = frozenset(n for n, v in self.nodes.items() if is_live_node(v))
        return self._live

    def unfenced_nodes(self) -> frozenset[int]:
        return frozenset(n for n, v in self.nodes.items() if not v.fenced)

    def is_live(self, node_id: int) -> bool:
        return node_id in self.live_nodes()

    def nodes_with_role(self, role: str, *, live_only: bool = True) -> list[int]:
        return sorted(
            n
            for n, v in self.nodes.items()
            if role in v.roles and (not live_only or is_live_node(v))
        )

    def led_by(self, node_id: int) -> Set[TP]:
        """Partitions ``node_id`` leads."""
        bucket = self._leads.get(node_id)
        if bucket is None:
            bucket = self._leads[node_id] = self._scan(node_id, "leads")
        return bucket

    def in_isr_of(self, node_id: int) -> Set[TP]:
        """Partitions whose ISR contains ``node_id``."""
        bucket = self._in_isr.get(node_id)
        if bucket is None:
            bucket = self._in_isr[node_id] = self._scan(node_id, "isr")
        return bucket

    def replicas_on(self, node_id: int) -> Set[TP]:
        """Partitions with a replica on ``node_id``."""
        bucket = self._replicas.get(node_id)
        if bucket is None:
            bucket = self._replicas[node_id] = self._scan(node_id, "replicas")
        return bucket

    def leaders_or_isr_members(self, node_ids: Set[int]) -> set[int]:
        """Which of ``node_ids`` lead a partition or are in an ISR (one scan for all the
        nodes whose sets were never asked for, as after a load)."""
        known = {n for n in node_ids if n in self._leads and n in self._in_isr}
        found = {n for n in known if self._leads[n] or self._in_isr[n]}
        unknown = set(node_ids) - known
        if unknown:
            for parts in self._partitions.values():
                for value in parts.values():
                    if value.leader in unknown:
                        found.add(value.leader)
                    if not unknown.isdisjoint(value.isr):
                        found.update(n for n in value.isr if n in unknown)
        return found

    def leader_counts(self) -> dict[int, int]:
        """Partitions led per node (one scan)."""
        counts = Counter(v.leader for v in self.iter_partitions() if v.leader >= 0)
        return dict(sorted(counts.items()))

    # -- topics and partitions -----------------------------------------------------------

    def topic(self, name: str) -> TopicValue | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionValue | None:
        parts = self._partitions.get(topic)
        return None if parts is None else parts.get(partition)

    def partition_table(self) -> Mapping[str, Mapping[int, PartitionValue]]:
        """topic -> partition id -> value: the raw table, for loops that must be fast."""
        return self._partitions

    def partitions_of(self, topic: str) -> list[PartitionValue]:
        """The topic's partitions in partition order."""
        parts = self._partitions.get(topic, {})
        return [parts[p] for p in sorted(parts)]

    def partition_ids(self, topic: str) -> Set[int]:
        return self._partitions.get(topic, {}).keys()

    def all_partitions(self) -> Iterator[PartitionValue]:
        """Every partition, by topic name then partition id."""
        for topic in sorted(self._partitions):
            yield from self.partitions_of(topic)

    def iter_partitions(self) -> Iterator[PartitionValue]:
        """Every partition, in no particular order (cheaper than :meth:`all_partitions`)."""
        for parts in self._partitions.values():
            yield from parts.values()

    def partition_count(self) -> int:
        return sum(len(parts) for parts in self._partitions.values())

    def leaderless(self) -> Set[TP]:
        return self._leaderless

    def reassigning(self) -> Set[TP]:
        """Partitions with a reassignment, in flight or queued."""
        return self._reassigning

    def deleting_topics(self) -> list[str]:
        return sorted(name for name, t in self.topics.items() if t.deleting)

    def unclean_enabled(self, topic: str, default: bool = False) -> bool:
        value = self.topics.get(topic)
        return (
            default
            if value is None
            else config_flag(value.configs, UNCLEAN_LEADER_ELECTION, default)
        )

    def min_insync_replicas(self, topic: str, default: int = 1) -> int:
        value = self.topics.get(topic)
        raw = None if value is None else value.configs.get(MIN_INSYNC_REPLICAS)
        try:
            return default if raw is None else int(raw)
        except ValueError:
            return default

    # -- kafka-topics --describe filters ---------------------------------------------------

    @staticmethod
    def target_replication(value: PartitionValue) -> int:
        """Replicas the partition should have: the target set while it is being moved."""
        moving = value.reassignment
        if moving is not None and moving.step != "QUEUED":
            return len(moving.target_replicas)
        return len(value.replicas)

    def under_replicated(self) -> list[PartitionValue]:
        return [v for v in self.all_partitions() if len(v.isr) < self.target_replication(v)]

    def unavailable(self) -> list[PartitionValue]:
        """Partitions with no leader, or whose leader is not live."""
        live = self.unfenced_nodes()
        return [v for v in self.all_partitions() if v.leader not in live]

    def under_min_isr(self, default_min_isr: int = 1) -> list[PartitionValue]:
        return [
            v
            for v in self.all_partitions()
            if len(v.isr) < self.min_insync_replicas(v.topic, default_min_isr)
        ]

    def at_min_isr(self, default_min_isr: int = 1) -> list[PartitionValue]:
        return [
            v
            for v in self.all_partitions()
            if len(v.isr) == self.min_insync_replicas(v.topic, default_min_isr)
        ]

    def reassignments(self) -> list[PartitionValue]:
        """Partitions being reassigned (in flight or queued), by topic then partition."""
        found = (self.partition(t, p) for t, p in sorted(self._reassigning))
        return [v for v in found if v is not None]

    def leader_imbalance(self) -> dict[int, float]:
        """The auto rebalance's imbalance ratio per preferred broker (deleting topics left out)."""
        assignment: dict[TP, tuple[int, ...]] = {}
        leaders: dict[TP, int | None] = {}
        for topic, parts in self._partitions.items():
            for p, value in parts.items():
                assignment[(topic, p)] = value.replicas
                leaders[(topic, p)] = value.leader if value.leader >= 0 else None
        return leader_imbalance(assignment, leaders, excluded_topics=self.deleting_topics())

    # -- equality and self-checks ------------------------------------------------------------

    def snapshot(self) -> tuple[Any, ...]:
        """Everything replay built, for comparing two images."""
        partitions = {(v.topic, v.partition): v for v in self.all_partitions()}
        return (self.controller, dict(self.nodes), dict(self.topics), partitions)

    def check_indexes(self) -> None:
        """Raise ``AssertionError`` if an index disagrees with the partitions."""
        leads: dict[int, set[TP]] = {}
        in_isr: dict[int, set[TP]] = {}
        replicas: dict[int, set[TP]] = {}
        leaderless: set[TP] = set()
        reassigning: set[TP] = set()
        for value in self.all_partitions():
            key = (value.topic, value.partition)
            for node in value.replicas:
                replicas.setdefault(node, set()).add(key)
            for node in value.isr:
                in_isr.setdefault(node, set()).add(key)
            if value.leader >= 0:
                leads.setdefault(value.leader, set()).add(key)
            else:
                leaderless.add(key)
            if value.reassignment is not None:
                reassigning.add(key)
        for expected, index, ask in (
            (leads, self._leads, self.led_by),
            (in_isr, self._in_isr, self.in_isr_of),
            (replicas, self._replicas, self.replicas_on),
        ):
            for node in set(expected) | set(index):  # kept ones, and scanned ones anew
                assert ask(node) == expected.get(node, set()), f"node {node} index"
        assert leaderless == self._leaderless, "leaderless index"
        assert reassigning == self._reassigning, "reassignment index"
