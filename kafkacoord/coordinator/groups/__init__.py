"""Group coordinator building blocks (docs/architecture.md#group-coordinator).

Submodules:

- :mod:`~kafkacoord.coordinator.groups.shard`: :class:`GroupShard`, one offsets partition,
  which routes to :mod:`~kafkacoord.coordinator.groups.membership` (the classic
  join/sync/heartbeat protocol), :mod:`~kafkacoord.coordinator.groups.consumer` (KIP-848),
  :mod:`~kafkacoord.coordinator.groups.crossover` (which of the two serves a group id),
  :mod:`~kafkacoord.coordinator.groups.offset_manager` (commits, fetches, deletes and
  expiry of offsets) and :mod:`~kafkacoord.coordinator.groups.admin` (list, describe and
  delete groups); :mod:`~kafkacoord.coordinator.groups.scheduling` holds its timers and
  :mod:`~kafkacoord.coordinator.groups.undo` the undo log of a failed handler.
- :mod:`~kafkacoord.coordinator.groups.state`, :mod:`~kafkacoord.coordinator.groups.member`
  and :mod:`~kafkacoord.coordinator.groups.classic_group`: a classic group's states and
  transition table, its members, and the group itself.
- :mod:`~kafkacoord.coordinator.groups.records`: every record a group shard writes.
- :mod:`~kafkacoord.coordinator.groups.partitioning`: the group -> offsets-partition hash
  (Kafka's ``Utils.abs(groupId.hashCode()) % numPartitions``).
- :mod:`~kafkacoord.coordinator.groups.assignors`: the client-side partition assignors
  (range, roundrobin, sticky, cooperative-sticky) as pure functions.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.partitioning import java_string_hash, partition_for

__all__ = ["java_string_hash", "partition_for"]
