"""Partition leadership and ISR (Kafka's ReplicationControlManager, partition half).

- Elections around node liveness: a fenced node loses its leaderships (offline election)
  and leaves every ISR; with eligible leader replicas off, except one it is the last
  member of (the partition is then leaderless, KRaft-style, so the node can come back as
  its clean leader). An unfenced node gets elected for leaderless partitions it can lead.
- Controlled shutdown (Kafka's ``KafkaController.doControlledShutdown``): leaderships move
  with the controlled-shutdown strategy, the node leaves the ISRs, and the partitions nobody
  else can lead are reported.
- ISR changes: ``AlterPartition`` from the leader, ``ReplicaStatus`` from a follower.

All work is proportional to the partitions of the node concerned (image indexes). Every
change is built by :mod:`.partition_change`, which holds the election and epoch rules.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kafkacoord.codecs.fencing import EpochOrder, partition_epoch_order
from kafkacoord.codecs.models import NodeValue, PartitionValue
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import AlterPartition, ReplicaStatus

from .batch import Batch
from .config import UNCLEAN_LEADER_ELECTION, ControllerConfig
from .image import TP, config_flag
from .partition_change import fence_node, partition_change

__all__ = ["PartitionManager", "check_node_epoch", "existing_partition"]


def check_node_epoch(batch: Batch, node_id: int, node_epoch: int) -> NodeValue:
    """The node's record, if ``node_epoch`` is its current epoch (else STALE_BROKER_EPOCH)."""
    node = batch.node(node_id)
    if node is None:
        raise ProtocolError(
            ErrorCode.STALE_BROKER_EPOCH, f"node {node_id} is not registered; register first"
        )
    if node.node_epoch != node_epoch:
        raise ProtocolError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"node {node_id} sent node epoch {node_epoch} but its current epoch is "
            f"{node.node_epoch}; register again",
        )
    return node


def existing_partition(batch: Batch, topic: str, partition: int) -> PartitionValue:
    """The partition's value; UNKNOWN_TOPIC_OR_PARTITION if it or its topic is gone or being
    deleted."""
    value = batch.topic(topic)
    if value is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}")
    if value.deleting:
        raise ProtocolError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} is being deleted"
        )
    current = batch.partition(topic, partition)
    if current is None:
        raise ProtocolError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} has no partition {partition} "
            f"(it has {value.num_partitions} partitions)",
        )
    return current


class PartitionManager:
    """Leader elections as nodes come and go, and ISR changes reported by replicas."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config

    # -- topic settings --------------------------------------------------------------------

    def unclean_enabled(self, batch: Batch, topic: str) -> bool:
        value = batch.topic(topic)
        default = self.config.unclean_leader_election_enable
        return (
            default
            if value is None
            else config_flag(value.configs, UNCLEAN_LEADER_ELECTION, default)
        )

    @staticmethod
    def is_deleting(batch: Batch, topic: str) -> bool:
        value = batch.topic(topic)
        return value is None or value.deleting

    # -- elections -------------------------------------------------------------------------

    def elect_offline(
        self,
        batch: Batch,
        current: PartitionValue,
        live: Collection[int],
        *,
        unclean: bool | None = None,
    ) -> bool:
        """Record an offline election (NEW: the initial one); ``False`` when no replica can
        lead. ``unclean`` defaults to the topic's setting."""
        if unclean is None:
            unclean = self.unclean_enabled(batch, current.topic)
        change = partition_change(batch, current)
        if not change.elect_offline(live, unclean=unclean):
            return False
        change.put()
        return True

    def elect_leaderless(self, batch: Batch, keys: Iterable[TP]) -> None:
        """Elect a leader for every leaderless partition of ``keys`` that can get one."""
        live = batch.live()
        for topic, partition in keys:
            current = batch.partition(topic, partition)
            if current is None or current.leader >= 0 or self.is_deleting(batch, topic):
                continue
            self.elect_offline(batch, current, live)

    def on_node_fenced(
        self,
        batch: Batch,
        node_id: int,
        *,
        leaders: bool = True,
        followers: bool = True,
        limit: int | None = None,
    ) -> bool:
        """The node is gone: re-elect what it led, drop it from the ISRs it is in.

        ``leaders``/``followers`` choose the partitions it leads and those it only follows
        (a fencing does the first at once and the second after, in batches of ``limit``
        changed partitions); True when the limit left some for a later batch. The hot
        path of a failover: :func:`.partition_change.fence_node`.
        """

        def policy(topic: str) -> tuple[bool, bool]:
            # A topic being deleted is left alone: its replicas are going anyway.
            return self.is_deleting(batch, topic), self.unclean_enabled(batch, topic)

        return fence_node(batch, node_id, policy, leaders=leaders, followers=followers,
                          limit=limit)  # fmt: skip

    def on_unclean_restart(self, batch: Batch, node_id: int) -> None:
        """The node came back without a controlled shutdown: its log may have lost its
        tail, so it is no longer an eligible leader replica anywhere (KIP-966)."""
        if batch.elr_min_isr is None:
            return
        changed = []
        for topic, partition in sorted(batch.image.replicas_on(node_id)):
            current = batch.partition(topic, partition)
            if current is None:
                continue
            new = partition_change(batch, current).remove_unclean_replica(node_id).build()
            if new is not None:
                changed.append(new)
        batch.put_existing_partitions(changed)

    def on_node_unfenced(self, batch: Batch, node_id: int) -> None:
        """Leaderless partitions with a replica on the node may now get a leader."""
        image = batch.image
        candidates = image.leaderless()
        mine = image.replicas_on(node_id)
        if len(mine) < len(candidates):
            keys = [k for k in mine if k in candidates]
        else:
            keys = [k for k in candidates if k in mine]
        keys.extend(
            k
            for k, v in batch.pending_partitions()
            if v is not None and v.leader < 0 and node_id in v.replicas
        )
        self.elect_leaderless(batch, sorted(set(keys)))

    def controlled_shutdown(self, batch: Batch, node_id: int) -> list[TP]:
        """Move leadership off a shutting-down node and take it out of every ISR.

        Returns the partitions it still leads (no other live ISR member could take over).
        The node must already be marked shutting down in ``batch``.
        """
        live = batch.live()
        remaining: list[TP] = []
        for key in batch.node_partitions(node_id, lead=True, isr=True):
            topic, partition = key
            current = batch.partition(topic, partition)
            if current is None or self.is_deleting(batch, topic):
                continue
            change = partition_change(batch, current)
            if current.leader == node_id:
                if not change.elect_controlled_shutdown(live, node_id):
                    remaining.append(key)
                    continue
                change.put()
            elif node_id in current.isr:
                isr = tuple(r for r in current.isr if r != node_id)
                if isr:
                    change.set_isr(isr).put()
        return sorted(remaining)

    # -- ISR changes -----------------------------------------------------------------------

    def alter_partition(self, batch: Batch, body: AlterPartition) -> None:
        """The leader's new ISR (Kafka's AlterPartition); stale epochs are rejected."""
        check_node_epoch(batch, body.node_id, body.node_epoch)
        current = existing_partition(batch, body.topic, body.partition)
        name = f"{body.topic}-{body.partition}"
        order = partition_epoch_order(
            body.leader_epoch, body.partition_epoch, current.leader_epoch, current.partition_epoch
        )
        if order.leader_epoch_differs:
            age = "stale" if order is EpochOrder.OLDER_LEADER_EPOCH else "unknown"
            raise ProtocolError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"{age} leader epoch {body.leader_epoch} for {name}: the current leader "
                f"epoch is {current.leader_epoch}",
            )
        if current.leader != body.node_id:
            raise ProtocolError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"node {body.node_id} is not the leader of {name} (leader: {current.leader})",
            )
        if order is not EpochOrder.SAME:
            raise ProtocolError(
                ErrorCode.INVALID_UPDATE_VERSION,
                f"partition epoch {body.partition_epoch} for {name} is not the current "
                f"{current.partition_epoch}",
            )
        new_isr = tuple(body.new_isr)
        if len(set(new_isr)) != len(new_isr):
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"duplicate nodes in ISR {new_isr}")
        if body.node_id not in new_isr:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST,
                f"the leader {body.node_id} must stay in the ISR of {name} (got {list(new_isr)})",
            )
        strangers = [r for r in new_isr if r not in current.replicas]
        if strangers:
            raise ProtocolError(
                ErrorCode.INELIGIBLE_REPLICA,
                f"nodes {strangers} are not replicas of {name} (replicas: "
                f"{list(current.replicas)})",
            )
        live = batch.live()
        dead = [r for r in new_isr if r not in current.isr and r not in live]
        if dead:
            raise ProtocolError(
                ErrorCode.INELIGIBLE_REPLICA,
                f"nodes {dead} cannot join the ISR of {name}: fenced or shutting down",
            )
        partition_change(batch, current).set_isr(new_isr).put()

    def replica_status(self, batch: Batch, body: ReplicaStatus) -> None:
        """A follower caught up (join the ISR) or fell behind (leave it)."""
        check_node_epoch(batch, body.node_id, body.node_epoch)
        current = existing_partition(batch, body.topic, body.partition)
        name = f"{body.topic}-{body.partition}"
        node = body.node_id
        if node not in current.replicas:
            raise ProtocolError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {node} holds no replica of {name}"
            )
        if body.leader_epoch != current.leader_epoch:
            raise ProtocolError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"node {node} follows leader epoch {body.leader_epoch} of {name}, the current "
                f"one is {current.leader_epoch}",
            )
        if current.leader == node:
            if body.caught_up:
                return
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"node {node} leads {name}: it cannot fall behind"
            )
        if not body.caught_up:
            if node in current.isr:
                isr = tuple(r for r in current.isr if r != node)
                partition_change(batch, current).set_isr(isr).put()
            return
        if node in current.isr:
            return
        if current.leader < 0:
            raise ProtocolError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"{name} has no leader to catch up with"
            )
        if node not in batch.live():
            raise ProtocolError(
                ErrorCode.INELIGIBLE_REPLICA,
                f"node {node} cannot join the ISR of {name}: fenced or shutting down",
            )
        partition_change(batch, current).set_isr((*current.isr, node)).put()
