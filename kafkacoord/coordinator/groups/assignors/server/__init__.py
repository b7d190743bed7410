"""Kafka's server-side partition assignors (docs/architecture.md#consumer-groups).

In the consumer rebalance protocol (KIP-848, ``group.protocol=consumer``) the group
coordinator, not a client, computes each member's target assignment. kafkacoord reproduces
Kafka 4's two built-in assignors as pure functions:

- :func:`uniform_assign`: ``UniformAssignor`` (``"uniform"``, the default), balanced and
  sticky, rack-aware where members and partitions have racks;
- :func:`range_assign`: ``RangeAssignor`` (``"range"``), co-partitioned and sticky.

Inputs and outputs follow :mod:`~kafkacoord.coordinator.groups.assignors.server.model`: members
map to their subscribed topics and current target assignment, topics to their partition counts;
the result maps every member to topic -> sorted partitions. :data:`SERVER_ASSIGNORS` maps
Kafka's assignor names (``group.remote.assignor``) to the functions.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.assignors.server.model import (
    GroupAssignment,
    MemberAssignment,
    Members,
    MemberSpec,
    PartitionRacks,
    ServerAssignor,
    TopicCounts,
)
from kafkacoord.coordinator.groups.assignors.server.range import range_assign
from kafkacoord.coordinator.groups.assignors.server.uniform import uniform_assign

__all__ = [
    "DEFAULT_SERVER_ASSIGNOR",
    "SERVER_ASSIGNORS",
    "GroupAssignment",
    "MemberAssignment",
    "MemberSpec",
    "Members",
    "PartitionRacks",
    "ServerAssignor",
    "TopicCounts",
    "range_assign",
    "uniform_assign",
]

SERVER_ASSIGNORS: dict[str, ServerAssignor] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
"""Kafka's server-side assignor names -> assignors."""

DEFAULT_SERVER_ASSIGNOR = "uniform"
"""Kafka's default (the first of ``group.consumer.assignors``)."""
