"""An online upgrade: a classic group becomes a consumer group (Kafka 4's
``convertToConsumerGroup``).

When the first member speaking the consumer protocol joins a Stable classic group, the
classic group's snapshot is replaced by consumer group records in the same append. Every
classic member becomes a member that still speaks the classic protocol, owning what the
classic generation gave it, at an epoch equal to that generation, with that assignment
as its target. Nothing moves yet: the joining member then bumps the epoch like any new
member, and the classic members reconcile the next time they rejoin.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkacoord.codecs.models import (
    ClassicMemberMetadata,
    ClassicProtocol,
    GroupCause,
    GroupCauseKind,
    MemberState,
    SubscribedTopic,
)
from kafkacoord.coordinator.groups.classic_group import ClassicGroup
from kafkacoord.coordinator.groups.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
)
from kafkacoord.coordinator.groups.records import group_metadata_tombstone
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.runtime.shard import Record

from .assignment import from_lists
from .coordinator import apply_record
from .group import ConsumerGroup
from .member import ConsumerMember
from .records import (
    epoch_record,
    member_assignment_record,
    member_metadata_record,
    subscription_metadata_record,
    target_epoch_record,
    target_record,
)

__all__ = ["convert_classic_group"]


def convert_classic_group(
    classic: ClassicGroup, topics: Mapping[str, SubscribedTopic]
) -> tuple[ConsumerGroup, list[Record]]:
    """The consumer group a Stable classic group becomes, and the records that say so
    (the classic snapshot's tombstone first)."""
    group_id = classic.group_id
    generation = classic.generation
    records = [group_metadata_tombstone(group_id)]
    subscribed: set[str] = set()
    for m in sorted(classic.members.values(), key=lambda m: m.member_id):
        try:
            subscription = decode_subscription(m.metadata(classic.protocol))
            assigned = decode_assignment(m.assignment).partitions if m.assignment else ()
        except (ConsumerProtocolError, ValueError) as exc:
            raise ProtocolError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"classic group {group_id!r} cannot become a consumer group: member "
                f"{m.member_id}'s subscription or assignment does not decode ({exc})",
            ) from exc
        owned = from_lists((t, [p]) for t, p in assigned)
        member = ConsumerMember(
            m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            classic=ClassicMemberMetadata(
                m.session_timeout_ms,
                tuple(ClassicProtocol(name, data) for name, data in m.protocols),
            ),
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            assigned=owned,
        )
        subscribed.update(member.subscribed_topic_names)
        records.append(member_metadata_record(group_id, member))
        records.append(target_record(group_id, member.member_id, owned))
        records.append(member_assignment_record(group_id, member))
    metadata = [topics[t] for t in sorted(subscribed) if t in topics]
    records.append(subscription_metadata_record(group_id, metadata))
    upgraded = GroupCause(GroupCauseKind.PROTOCOL_UPGRADED,
                          detail=f"from classic generation {generation}")  # fmt: skip
    records.append(epoch_record(group_id, generation, upgraded))
    records.append(target_epoch_record(group_id, generation))
    group = ConsumerGroup(group_id)
    for record in records[1:]:
        apply_record(group, record.key, record.value)
    return group, records
