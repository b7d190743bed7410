"""Partition leadership and ISR (Kafka's ReplicationControlManager, partition half).

- Elections around node liveness: a fenced node loses its leaderships (offline election)
  and leaves every ISR, except one it is the last member of (the partition is then
  leaderless, KRaft-style, so the node can come back as its clean leader); an unfenced
  node gets elected for leaderless partitions it can lead.
- Controlled shutdown (Kafka's ``KafkaController.doControlledShutdown``): leaderships move
  with the controlled-shutdown strategy, the node leaves the ISRs, and the partitions nobody
  else can lead are reported.
- ISR changes: ``AlterPartition`` from the leader, ``ReplicaStatus`` from a follower.

All work is proportional to the partitions of the node concerned (image indexes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from kafkacoord.codecs.models import NodeValue, PartitionState, PartitionValue
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import AlterPartition, ReplicaStatus

from .batch import Batch
from .changes import NO_LEADER, Election, apply_change, next_value
from .config import UNCLEAN_LEADER_ELECTION, ControllerConfig
from .election import controlled_shutdown_election, offline_election
from .elr import next_elr, without_node
from .image import TP, config_flag

# Where an offline election found its leader -> the kind recorded with it.
_ELECTION_KIND = {
    "isr": Election.OFFLINE,
    "elr": Election.ELR,
    "last_known": Election.LAST_KNOWN,
    "unclean": Election.UNCLEAN,
}

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
    ) -> PartitionValue | None:
        """The partition after an offline election (NEW: the initial one), or ``None`` when
        no replica can lead. ``unclean`` defaults to the topic's setting."""
        if current.state is PartitionState.NEW:
            # New -> Online: the first live replica leads, the live replicas are the ISR.
            alive = tuple(r for r in current.replicas if r in live)
            if not alive:
                return None
            return next_value(batch, current, leader=alive[0], isr=alive, election=Election.INITIAL)
        if unclean is None:
            unclean = self.unclean_enabled(batch, current.topic)
        result = offline_election(current.replicas, current.isr, live, unclean=unclean,
                                  elr=current.elr, last_known=current.last_known_elr)  # fmt: skip
        if result is None:
            return None
        kind = _ELECTION_KIND[result.via]
        return next_value(batch, current, leader=result.leader, isr=result.isr, election=kind)

    def elect_leaderless(self, batch: Batch, keys: Iterable[TP]) -> None:
        """Elect a leader for every leaderless partition of ``keys`` that can get one."""
        live = batch.live()
        for topic, partition in keys:
            current = batch.partition(topic, partition)
            if current is None or current.leader >= 0 or self.is_deleting(batch, topic):
                continue
            elected = self.elect_offline(batch, current, live)
            if elected is not None:
                batch.put_partition(elected)

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
        changed partitions); True when the limit left some for a later batch.

        The hot path of a failover: it visits only the node's partitions (image indexes)
        and builds each new record with one constructor call. Every partition it changes
        exists and goes to ONLINE or OFFLINE, which Kafka's table allows from any existing
        state, so the records skip the per-record transition check.
        """
        live = batch.live()
        now_ms, epoch = batch.now_ms, batch.epoch
        pending = batch.has_pending_partitions()
        table = batch.image.partition_table()
        # topic -> (deleting, unclean, min ISR; 0 when eligible leader replicas are off)
        flags: dict[str, tuple[bool, bool, int]] = {}
        elr_default = batch.elr_min_isr
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
            if not both and (current.leader == node_id) is not leaders:
                continue  # the other half of a fencing
            flag = flags.get(topic)
            if flag is None:
                flag = flags[topic] = (
                    self.is_deleting(batch, topic),
                    self.unclean_enabled(batch, topic),
                    0 if elr_default is None
                    else batch.image.min_insync_replicas(topic, elr_default),
                )  # fmt: skip
            if flag[0]:
                continue  # its replicas are being deleted anyway
            min_isr = flag[2]
            isr = current.isr
            # Without ELR the ISR never shrinks to nothing: its last member stays, so it
            # can return as a clean leader. With ELR that member becomes eligible instead.
            if node_id in isr and (len(isr) > 1 or min_isr):
                members = list(isr)
                members.remove(node_id)
                isr = tuple(members)
            elr, last = current.elr, current.last_known_elr
            if min_isr:
                elr, last = next_elr(current, current.replicas, isr, min_isr)
            if current.leader != node_id:
                if isr is current.isr and elr == current.elr and last == current.last_known_elr:
                    continue
                changed.append(
                    PartitionValue(
                        topic, partition, current.state, current.replicas, isr,
                        current.leader, current.leader_epoch, current.partition_epoch + 1,
                        now_ms, epoch, current.reassignment, current.election, elr, last,
                    )
                )  # fmt: skip
                continue
            result = offline_election(current.replicas, isr, live, unclean=flag[1], elr=elr,
                                      last_known=last)  # fmt: skip
            if result is None:
                state, leader, kind = PartitionState.OFFLINE, NO_LEADER, Election.OFFLINE
            else:
                state, leader, isr = PartitionState.ONLINE, result.leader, result.isr
                kind = _ELECTION_KIND[result.via]
                if min_isr:
                    # The new leader leaves the ELR; a full ISR again clears it.
                    full = len(isr) >= min_isr
                    elr = () if full else tuple(r for r in elr if r not in isr)
                    last = ()
            changed.append(
                PartitionValue(
                    topic, partition, state, current.replicas, isr, leader,
                    current.leader_epoch + 1, current.partition_epoch + 1, now_ms, epoch,
                    current.reassignment, kind, elr, last,
                )
            )  # fmt: skip
        batch.put_existing_partitions(changed)
        return more

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
            left = without_node(current, node_id)
            if left is None:
                continue
            changed.append(
                dataclasses.replace(
                    current, elr=left[0], last_known_elr=left[1], updated_ms=batch.now_ms,
                    controller_epoch=batch.epoch, partition_epoch=current.partition_epoch + 1,
                )
            )  # fmt: skip
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
            if current.leader == node_id:
                result = controlled_shutdown_election(
                    current.replicas, current.isr, live, (node_id,)
                )
                if result is None:
                    remaining.append(key)
                    continue
                apply_change(
                    batch, current, leader=result.leader, isr=result.isr,
                    election=Election.CONTROLLED_SHUTDOWN,
                )  # fmt: skip
            elif node_id in current.isr:
                isr = tuple(r for r in current.isr if r != node_id)
                if isr:
                    apply_change(batch, current, isr=isr)
        return sorted(remaining)

    # -- ISR changes -----------------------------------------------------------------------

    def alter_partition(self, batch: Batch, body: AlterPartition) -> None:
        """The leader's new ISR (Kafka's AlterPartition); stale epochs are rejected."""
        check_node_epoch(batch, body.node_id, body.node_epoch)
        current = existing_partition(batch, body.topic, body.partition)
        name = f"{body.topic}-{body.partition}"
        if body.leader_epoch != current.leader_epoch:
            age = "stale" if body.leader_epoch < current.leader_epoch else "unknown"
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
        if body.partition_epoch != current.partition_epoch:
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
        apply_change(batch, current, isr=new_isr)

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
                apply_change(batch, current, isr=tuple(r for r in current.isr if r != node))
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
        apply_change(batch, current, isr=(*current.isr, node))
