"""Kafka's client-side partition assignors as pure functions (docs/architecture.md#classic-groups).

In Kafka's classic group protocol the group leader (a client) runs the assignor; kafkacoord
reproduces them so that its own clients assign exactly as Kafka's Java consumer would:

- :func:`range_assign`: ``RangeAssignor`` (``"range"``);
- :func:`roundrobin_assign`: ``RoundRobinAssignor`` (``"roundrobin"``);
- :func:`sticky_assign`: ``StickyAssignor`` (``"sticky"``);
- :func:`cooperative_sticky_assign`: ``CooperativeStickyAssignor`` (``"cooperative-sticky"``),
  with :func:`partitions_to_revoke` for the members' side of a cooperative rebalance.

Inputs and outputs follow :mod:`~kafkacoord.coordinator.groups.assignors.common`: partitions
are ``(topic, partition)`` tuples; every member gets an entry; each list is sorted by topic (Java
``String`` order) then partition. :data:`ASSIGNORS` maps Kafka's protocol names to
:class:`Assignor` objects with one calling convention.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.assignors.common import (
    DEFAULT_GENERATION,
    Assignment,
    Generations,
    GroupInstanceIds,
    OwnedPartitions,
    PartitionsPerTopic,
    RebalanceProtocol,
    Subscriptions,
    TopicPartition,
)
from kafkacoord.coordinator.groups.assignors.cooperative import (
    cooperative_sticky_assign,
    partitions_to_revoke,
)
from kafkacoord.coordinator.groups.assignors.range import range_assign
from kafkacoord.coordinator.groups.assignors.registry import (
    ASSIGNORS,
    COOPERATIVE_STICKY,
    RANGE,
    ROUNDROBIN,
    STICKY,
    Assignor,
    FunctionAssignor,
    get_assignor,
)
from kafkacoord.coordinator.groups.assignors.roundrobin import roundrobin_assign
from kafkacoord.coordinator.groups.assignors.sticky import StickyPlan, sticky_assign, sticky_plan

__all__ = [
    "ASSIGNORS",
    "COOPERATIVE_STICKY",
    "DEFAULT_GENERATION",
    "RANGE",
    "ROUNDROBIN",
    "STICKY",
    "Assignment",
    "Assignor",
    "FunctionAssignor",
    "Generations",
    "GroupInstanceIds",
    "OwnedPartitions",
    "PartitionsPerTopic",
    "RebalanceProtocol",
    "StickyPlan",
    "Subscriptions",
    "TopicPartition",
    "cooperative_sticky_assign",
    "get_assignor",
    "partitions_to_revoke",
    "range_assign",
    "roundrobin_assign",
    "sticky_assign",
    "sticky_plan",
]
