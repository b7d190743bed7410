"""The assignors by Kafka protocol name, behind one calling convention.

A classic-protocol group leader picks the assignor named by the group's chosen protocol
(``partition.assignment.strategy``); :data:`ASSIGNORS` maps Kafka's names to objects with a
uniform :meth:`Assignor.assign` that accepts every optional input and ignores the ones its
algorithm does not use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    "COOPERATIVE_STICKY",
    "RANGE",
    "ROUNDROBIN",
    "STICKY",
    "Assignor",
    "FunctionAssignor",
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


# (subscriptions, partitions per topic, owned, generations, group instance ids)
_Run = Callable[
    [
        Subscriptions,
        PartitionsPerTopic,
        OwnedPartitions | None,
        Generations | None,
        GroupInstanceIds | None,
    ],
    Assignment,
]


@dataclass(frozen=True, slots=True)
class FunctionAssignor:
    """An assignment function under its Kafka protocol name, with the uniform signature."""

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...]
    run: _Run

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions_per_topic: PartitionsPerTopic,
        *,
        owned: OwnedPartitions | None = None,
        generations: Generations | None = None,
        group_instance_ids: GroupInstanceIds | None = None,
    ) -> Assignment:
        return self.run(subscriptions, partitions_per_topic, owned, generations, group_instance_ids)


_EAGER = (RebalanceProtocol.EAGER,)

# Kafka's RangeAssignor and RoundRobinAssignor use group instance ids; the sticky ones
# use owned partitions and generations.
RANGE: Final = FunctionAssignor(
    "range", _EAGER, lambda s, p, _o, _g, ids: range_assign(s, p, group_instance_ids=ids)
)
ROUNDROBIN: Final = FunctionAssignor(
    "roundrobin", _EAGER, lambda s, p, _o, _g, ids: roundrobin_assign(s, p, group_instance_ids=ids)
)
STICKY: Final = FunctionAssignor(
    "sticky", _EAGER, lambda s, p, owned, gens, _i: sticky_assign(s, p, owned, gens)
)
COOPERATIVE_STICKY: Final = FunctionAssignor(
    "cooperative-sticky",
    (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
    lambda s, p, owned, gens, _i: cooperative_sticky_assign(s, p, owned, gens),
)

_ALL: tuple[Assignor, ...] = (RANGE, ROUNDROBIN, STICKY, COOPERATIVE_STICKY)

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
