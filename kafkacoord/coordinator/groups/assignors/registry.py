"""The assignors by Kafka protocol name, behind one calling convention.

A classic-protocol group leader picks the assignor named by the group's chosen protocol
(``partition.assignment.strategy``); :data:`ASSIGNORS` maps Kafka's names to objects with a
uniform :meth:`Assignor.assign` that accepts every optional input and ignores the ones its
algorithm does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Protocol

from kafkacoord.coordinator.groups.assignors.common import (
    Assignment,
    Generations,
    GroupInstanceIds,
    OwnedPartitions,
    PartitionsPerTopic,
    RebalanceProtocol,
    Subscriptions,
)
from kafkacoord.coordinator.groups.assignors.cooperative import cooperative_sticky_assign
from kafkacoord.coordinator.groups.assignors.range import range_assign
from kafkacoord.coordinator.groups.assignors.roundrobin import roundrobin_assign
from kafkacoord.coordinator.groups.assignors.sticky import sticky_assign

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "get_assignor",
]


class Assignor(Protocol):
    """What a group leader needs from an assignor (Kafka's ``ConsumerPartitionAssignor``)."""

    @property
    def name(self) -> str:
        """The protocol name members advertise, e.g. ``"range"``."""
        ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        """Rebalance protocols this assignor supports, preferred first."""
        ...

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        """Member id -> sorted partitions, with an entry for every member."""
        ...


class RangeAssignor:
    """Kafka's ``RangeAssignor``; uses ``group_instance_ids``."""

    name: Final = "range"
    supported_protocols: Final = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        return range_assign(
            subscriptions, partitions_per_topic, group_instance_ids=group_instance_ids
        )


class RoundRobinAssignor:
    """Kafka's ``RoundRobinAssignor``; uses ``group_instance_ids``."""

    name: Final = "roundrobin"
    supported_protocols: Final = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        return roundrobin_assign(
            subscriptions, partitions_per_topic, group_instance_ids=group_instance_ids
        )


class StickyAssignor:
    """Kafka's ``StickyAssignor``; uses ``owned`` and ``generations``."""

    name: Final = "sticky"
    supported_protocols: Final = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        return sticky_assign(subscriptions, partitions_per_topic, owned, generations)


class CooperativeStickyAssignor:
    """Kafka's ``CooperativeStickyAssignor``; uses ``owned`` and ``generations``."""

    name: Final = "cooperative-sticky"
    supported_protocols: Final = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        return cooperative_sticky_assign(subscriptions, partitions_per_topic, owned, generations)


_ALL: tuple[Assignor, ...] = (
    RangeAssignor(),
    RoundRobinAssignor(),
    StickyAssignor(),
    CooperativeStickyAssignor(),
)

ASSIGNORS: Mapping[str, Assignor] = MappingProxyType({a.name: a for a in _ALL})
"""Kafka protocol name -> assignor: ``range``, ``roundrobin``, ``sticky``,
``cooperative-sticky``."""


def get_assignor(name: str) -> Assignor:
    """The assignor for protocol ``name``. Raises ``KeyError`` naming the known ones."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        known = ", ".join(sorted(ASSIGNORS))
        raise KeyError(f"unknown assignor {name!r}; known: {known}") from None
