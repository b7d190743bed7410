"""A member of a classic group (Kafka's ``ClassicGroupMember``) and its read-only view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkacoord.coordinator.runtime.shard import RequestRef

__all__ = ["Member", "MemberSnapshot", "Protocols"]

Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols, most preferred first: (name, metadata)."""


@dataclass(slots=True, eq=False)
class Member:
    """One member of a classic group (Kafka's ``ClassicGroupMember``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # Parked requests, answered when the join (sync) phase completes.
    join_ref: RequestRef | None = None
    sync_ref: RequestRef | None = None
    # A member that joined and has not yet received its first JoinGroup response.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_ref is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_ref is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: Iterable[str]) -> str:
        """The first protocol in this member's preference order that is a candidate."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

    def has_satisfied_heartbeat(self) -> bool:
        # A new member can expire even while parked; an existing member that is parked in a
        # rebalance counts as alive (its JoinGroup/SyncGroup is the heartbeat).
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    """A member as :class:`~.classic_group.GroupSnapshot` shows it: what DescribeGroups
    reports and what a reloaded shard must reproduce."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    metadata: bytes
    assignment: bytes
