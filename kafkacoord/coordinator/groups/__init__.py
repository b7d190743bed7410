"""Group coordinator building blocks (DESIGN.md §6).

Submodules:

- :mod:`~kafkacoord.coordinator.groups.partitioning`: the group -> offsets-partition hash
  (Kafka's ``Utils.abs(groupId.hashCode()) % numPartitions``).
- :mod:`~kafkacoord.coordinator.groups.assignors`: the client-side partition assignors
  (range, roundrobin, sticky, cooperative-sticky) as pure functions.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.partitioning import java_string_hash, partition_for

__all__ = ["java_string_hash", "partition_for"]
