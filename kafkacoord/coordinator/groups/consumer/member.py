"""A member of a KIP-848 consumer group (Kafka's ``ConsumerGroupMember``).

Immutable: the handlers build the member they want and write its records; replay
installs it. Two records hold it, as in Kafka: its subscription and identity
(``ConsumerGroupMemberMetadata``) and where it stands in reconciliation
(``ConsumerGroupCurrentMemberAssignment``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Final

from kafkacoord.codecs.models import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    MemberState,
)

from .assignment import EMPTY, Assignment, from_records, to_records

__all__ = ["JOIN_EPOCH", "LEAVE_EPOCH", "STATIC_LEAVE_EPOCH", "ConsumerMember"]

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """A member of a consumer group (Kafka's ``ConsumerGroupMember``).

    Its identity and subscription, as ``ConsumerGroupMemberMetadata`` holds them: client
    id and host, subscribed topic names or regex, rebalance timeout, instance id (a static
    member), rack id and the server-side assignor it asks for; ``classic`` while it still
    speaks the classic protocol. And where it stands in reconciliation, as
    ``ConsumerGroupCurrentMemberAssignment`` holds it: its member epoch and the one before,
    its state (Kafka's ``MemberState``), the partitions assigned to it and those it has
    yet to revoke. Handlers build the member they want (:meth:`replace`); replay installs it.
    """

    member_id: str
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    # Set while the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat).
    classic: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=lambda: EMPTY)
    pending_revocation: Assignment = field(default_factory=lambda: EMPTY)

    def replace(self, **changes: object) -> ConsumerMember:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def owned_partitions(self) -> list[tuple[str, int]]:
        """What it still holds: assigned, and not yet revoked (partition epochs)."""
        owned = [(t, p) for t, ps in self.assigned.items() for p in ps]
        owned.extend((t, p) for t, ps in self.pending_revocation.items() for p in ps)
        return owned

    # ------------------------------------------------------------------ records

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            subscribed_topic_regex=self.subscribed_topic_regex,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state,
            assigned_partitions=to_records(self.assigned),
            partitions_pending_revocation=to_records(self.pending_revocation),
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerMember:
        return self.replace(
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            subscribed_topic_regex=value.subscribed_topic_regex,
            server_assignor=value.server_assignor,
            classic=value.classic_member_metadata,
        )

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerMember:
        return self.replace(
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=value.state,
            assigned=from_records(value.assigned_partitions),
            pending_revocation=from_records(value.partitions_pending_revocation),
        )

    def metadata_differs(self, other: ConsumerMember) -> bool:
        return self.metadata_value() != other.metadata_value()

    def assignment_differs(self, other: ConsumerMember) -> bool:
        return (
            self.member_epoch != other.member_epoch
            or self.previous_member_epoch != other.previous_member_epoch
            or self.state is not other.state
            or dict(self.assigned) != dict(other.assigned)
            or dict(self.pending_revocation) != dict(other.pending_revocation)
        )
