"""Members that still speak the classic protocol inside a consumer group (Kafka 4's
``classicGroupJoinToConsumerGroup`` and friends): the bridge of an online upgrade.

The coordinator assigns, so a classic member's JoinGroup is answered at once: it is told
it leads with ``skip_assignment`` set (KIP-814), and SyncGroup hands it what it owns now.
It reconciles only when it rejoins, so while it is behind its target its Heartbeat
answers REBALANCE_IN_PROGRESS. Its owned partitions come from its subscription (a
cooperative client lists them; an eager one gave them all up before rejoining).
"""

from __future__ import annotations

from kafkacoord.codecs.models import ClassicMemberMetadata, ClassicProtocol, GroupCauseKind
from kafkacoord.coordinator.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)
from kafkacoord.coordinator.groups.membership import MemberIdFactory, join_error
from kafkacoord.coordinator.protocol import Empty, ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_commit import HeartbeatRequest
from kafkacoord.coordinator.runtime.shard import Reply, RequestRef, Result

from .assignment import from_lists, partitions_of
from .coordinator import ConsumerGroups, _fenced_instance, _released, _unknown
from .group import ConsumerGroup
from .member import ConsumerMember

__all__ = ["ClassicMembers"]


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup from members of a consumer group
    that still speak the classic protocol (Kafka's ``classicGroupJoinToConsumerGroup``,
    ``classicGroupSyncToConsumerGroup`` and the like).

    Each is a :class:`~.member.ConsumerMember` with classic metadata, in the group's epochs
    and target assignment like any other member; the coordinator assigns, so a JoinGroup
    is answered at once and the member reconciles only when it rejoins.
    """

    def __init__(self, groups: ConsumerGroups, new_member_id: MemberIdFactory) -> None:
        self._groups = groups
        self._new_member_id = new_member_id

    def join(self, ref: RequestRef, body: api.JoinGroup, group: ConsumerGroup, now: int) -> Result:
        if body.protocol_type != PROTOCOL_TYPE:
            raise ProtocolError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"group {group.group_id!r} is a consumer group: classic members must use "
                f"protocol type {PROTOCOL_TYPE!r}, not {body.protocol_type!r}",
            )
        try:
            subscription = decode_subscription(body.protocols[0].metadata)
        except ConsumerProtocolError as exc:
            raise ProtocolError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"unreadable subscription: {exc}"
            ) from exc
        plan = self._groups.plan_for(group)
        member_id = body.member_id
        static = group.static_member(body.group_instance_id)
        if body.group_instance_id is None and not member_id:
            # KIP-394: a new member learns its id first.
            new_id = self._new_member_id(body.client_id or "consumer")
            reply = join_error(ref, new_id, ErrorCode.MEMBER_ID_REQUIRED,
                               "rejoin with the member id given")  # fmt: skip
            return Result(replies=[reply])
        if static is not None and member_id and static.member_id != member_id:
            raise _fenced_instance(group.group_id, member_id, body.group_instance_id or "", static)
        if static is not None and not member_id:
            # A static member restarted: it takes over its instance's place.
            member_id = self._new_member_id(body.client_id or "consumer")
            member = self._groups.replace_static(plan, static, member_id)
            new = False
        else:
            found = group.members.get(member_id) if static is None else static
            new = found is None
            member = found or ConsumerMember(member_id)
            if new:
                self._groups.check_size(plan, member)
        rebalance_ms = body.rebalance_timeout_ms
        updated = member.replace(
            client_id=body.client_id,
            client_host=body.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=body.session_timeout_ms if rebalance_ms < 0 else rebalance_ms,
            instance_id=body.group_instance_id,
            rack_id=subscription.rack_id,
            classic=ClassicMemberMetadata(
                body.session_timeout_ms,
                tuple(ClassicProtocol(p.name, p.metadata) for p in body.protocols),
            ),
        )
        owned = from_lists((t, [p]) for t, p in subscription.owned_partitions)
        reconciled = self._groups.update_member(plan, member, updated, new=new, owned=owned,
                                                now=now)  # fmt: skip
        response = api.JoinGroupResponse(
            generation_id=reconciled.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=body.protocols[0].name,
            leader=reconciled.member_id,
            member_id=reconciled.member_id,
            skip_assignment=True,
        )
        replies = self._groups.hints_for(plan, reconciled, released=_released(member, reconciled))
        replies.append(Reply(ref, "JoinGroup", body=response))
        return Result(plan.records, replies)

    def _member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int
    ) -> ConsumerMember:
        member = group.members.get(member_id)
        static = group.static_member(instance_id)
        if static is not None and static.member_id != member_id:
            raise _fenced_instance(group.group_id, member_id, instance_id or "", static)
        if member is None:
            raise _unknown(group.group_id, member_id)
        if generation != member.member_epoch:
            raise ProtocolError(
                ErrorCode.ILLEGAL_GENERATION,
                f"generation {generation} is not member {member_id}'s generation "
                f"{member.member_epoch} in group {group.group_id!r}",
            )
        return member

    def sync(self, ref: RequestRef, body: api.SyncGroup, group: ConsumerGroup, now: int) -> Result:
        member = self._member(group, body.member_id, body.group_instance_id, body.generation_id)
        if body.protocol_type is not None and body.protocol_type != PROTOCOL_TYPE:
            raise ProtocolError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"protocol type {body.protocol_type!r} is not {PROTOCOL_TYPE!r}",
            )
        self._groups.touch(group.group_id, member, now)
        owned = tuple(sorted(partitions_of(member.assigned)))
        response = api.SyncGroupResponse(
            protocol_type=PROTOCOL_TYPE,
            protocol_name=body.protocol_name,
            assignment=encode_assignment(Assignment(owned)),
        )
        return Result(replies=[Reply(ref, "SyncGroup", body=response)])

    def heartbeat(
        self, ref: RequestRef, body: HeartbeatRequest, group: ConsumerGroup, now: int
    ) -> Result:
        member = self._member(group, body.member_id, body.group_instance_id, body.generation_id)
        self._groups.touch(group.group_id, member, now)
        if not member.is_reconciled_to(group.assignment_epoch):
            # Behind its target: it reconciles by rejoining.
            reply = Reply(ref, "Heartbeat", ErrorCode.REBALANCE_IN_PROGRESS, None,
                          f"group {group.group_id!r} is at epoch {group.assignment_epoch}; "
                          "rejoin")  # fmt: skip
            return Result(replies=[reply])
        return Result(replies=[Reply(ref, "Heartbeat", body=Empty())])

    def leave(self, ref: RequestRef, body: api.LeaveGroup, group: ConsumerGroup) -> Result:
        results: list[api.MemberResult] = []
        gone: list[str] = []
        for identity in body.members:
            member = group.members.get(identity.member_id)
            error = ErrorCode.NONE
            if identity.group_instance_id is not None:
                member = group.static_member(identity.group_instance_id)
                if member is not None and identity.member_id not in ("", member.member_id):
                    error = ErrorCode.FENCED_INSTANCE_ID
            if member is None or member.member_id in gone:
                error = error or ErrorCode.UNKNOWN_MEMBER_ID
            elif not error:
                gone.append(member.member_id)
            result = api.MemberResult(
                member_id=member.member_id if member and not error else identity.member_id,
                group_instance_id=identity.group_instance_id,
                error=error,
            )
            results.append(result)
        records, replies = (
            self._groups.fence_member(group, *gone, kind=GroupCauseKind.MEMBER_LEFT)
            if gone
            else ([], [])
        )
        replies.append(Reply(ref, "LeaveGroup", body=api.LeaveGroupResponse(members=results)))
        return Result(records, replies)
