"""The states of a classic group and the transitions between them (Kafka's
``ClassicGroupState``).

A transition not in the table is a bug: :class:`IllegalStateTransitionError` is raised
and nothing changes.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["VALID_PREVIOUS", "GroupState", "IllegalStateTransitionError", "can_transition"]


class GroupState(str, enum.Enum):
    """Kafka's ``ClassicGroupState``; the value is Kafka's display name."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# Target state -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS: Final[dict[GroupState, frozenset[GroupState]]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransitionError(RuntimeError):
    """A transition Kafka forbids was attempted: a bug, never applied."""


def can_transition(source: GroupState, target: GroupState) -> bool:
    """Whether the table lets a group in ``source`` move to ``target``."""
    return source in VALID_PREVIOUS[target]
