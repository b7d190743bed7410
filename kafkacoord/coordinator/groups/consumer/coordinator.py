"""KIP-848 consumer groups of one shard (the consumer-group half of Kafka's
``GroupMetadataManager``): ConsumerGroupHeartbeat, leaving, session and rebalance
timeouts, and subscribed-topic metadata.

Handlers never change a group: they build the members and assignments they want, return
the records that say so, and answer from what they built. Replay installs the records
(:meth:`ConsumerGroups.replay`), on writes and on loads alike. The target assignment is
computed in the same result as the group epoch bump that calls for it, so the group is
in ASSIGNING only between a load and the next event.

The soft state kept here (each member's rebalance epoch and last heartbeat) and the
timers change through the shard's undo log, so a request or timer that fails leaves
neither behind.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkacoord.codecs.models import (
    AvroModel,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupCause,
    GroupCauseKind,
    MemberState,
    SubscribedTopic,
)
from kafkacoord.coordinator.groups.assignors.server import SERVER_ASSIGNORS
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.scheduling import ShardTimers
from kafkacoord.coordinator.groups.undo import UndoLog
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.base import PUSH_CORRELATION_ID
from kafkacoord.coordinator.protocol.binary_consumer import (
    ConsumerHeartbeatRequest,
    TopicPartitionsRequest,
)
from kafkacoord.coordinator.runtime.shard import Record, Reply, RequestRef, Result

from .assignment import EMPTY, Assignment, from_lists, is_subset, to_lists
from .group import ConsumerGroup, compile_regex
from .member import JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerMember
from .reconciliation import reconcile
from .records import (
    epoch_record,
    member_assignment_record,
    member_cause,
    member_metadata_record,
    member_tombstones,
    subscription_metadata_record,
    target_epoch_record,
    target_record,
)

__all__ = ["CONSUMER_GROUP_KEYS", "ConsumerGroups", "TopicsImage"]

TopicsImage = Mapping[str, SubscribedTopic]
"""The service's Kafka topics as the broker describes them: name → partitions and racks."""

CONSUMER_GROUP_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)

_SESSION = "cg-session"
_REBALANCE = "cg-rebalance"


def session_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (_SESSION, group_id, member_id)


def rebalance_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (_REBALANCE, group_id, member_id)


@dataclass(slots=True)
class Plan:
    """What one event decides for a group, before any of it is replayed: the members as
    the event leaves them, the group epoch and target assignment epoch, each member's
    target assignment, and the records that say so (in Kafka, what ``GroupMetadataManager``
    works out before it returns the records in a ``CoordinatorResult``)."""

    group: ConsumerGroup
    members: dict[str, ConsumerMember]
    records: list[Record]
    epoch: int
    target_epoch: int
    targets: dict[str, Assignment]


class ConsumerGroups:
    """The consumer groups of one group shard: the consumer-protocol half of Kafka's
    ``GroupMetadataManager``.

    It answers ``ConsumerGroupHeartbeat`` (join at member epoch 0, heartbeat, leave at -1,
    or -2 for a static member), expires members whose session times out and fences those
    that do not revoke within their rebalance timeout, and follows the subscribed topics'
    metadata. A change of membership, subscription or metadata bumps the group epoch and
    computes the new target assignment with the server-side assignor in the same result;
    each member then reconciles towards its target (:func:`.reconciliation.reconcile`).
    ``groups`` is what replay built from the records; beside it, soft state only: each
    member's rebalance timeout epoch and where its last heartbeat came from (where
    ``ConsumerGroupHint`` pushes go).
    """

    def __init__(self, config: GroupConfig, timers: ShardTimers, undo: UndoLog) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self.topics: dict[str, SubscribedTopic] = {}
        # Until the broker's topics are first known, groups keep the metadata they had.
        self.topics_known = False
        self._timers = timers
        self._undo = undo
        # (group, member) -> the epoch a rebalance timeout was set for.
        self._rebalance_epochs: dict[tuple[str, str], int] = {}
        # (group, member) -> its last heartbeat: where hints go (soft state, as Kafka's
        # connections are; a new leader learns them from the next heartbeats).
        self._last_heard: dict[tuple[str, str], RequestRef] = {}

    # ================================================================= replay

    def replay(self, key: AvroModel, value: AvroModel | None) -> None:
        group_id: str = key.group  # type: ignore[attr-defined]
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[group_id] = ConsumerGroup(group_id)
        if not apply_record(group, key, value):
            del self.groups[group_id]

    # ================================================================= lifecycle

    def on_loaded(self, now: int) -> Result:
        result = Result()
        for group in list(self.groups.values()):
            for member in group.members.values():
                self.touch(group.group_id, member, now)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, member, now)
            if group.group_epoch > group.assignment_epoch:
                # A load between an epoch bump and its target (a partial write): finish it.
                plan = self.plan_for(group)
                self._assign(plan)
                result.records.extend(plan.records)
        return result

    def unload(self) -> None:
        self.groups.clear()
        self._rebalance_epochs.clear()
        self._last_heard.clear()

    # ================================================================= heartbeat

    def heartbeat(
        self,
        ref: RequestRef,
        body: ConsumerHeartbeatRequest,
        now: int,
        *,
        converted: tuple[ConsumerGroup, list[Record]] | None = None,
    ) -> Result:
        """ConsumerGroupHeartbeat. ``converted`` is a classic group turned into this
        consumer group by this very request: the group as its records build it, and them."""
        self._validate(body)
        if body.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(ref, body)
        group = self.groups.get(body.group_id) if converted is None else converted[0]
        joining = body.member_epoch == JOIN_EPOCH
        if group is None:
            if not joining:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"member {body.member_id} is not in group {body.group_id!r}, which does "
                    "not exist; rejoin with epoch 0",
                )
            group = ConsumerGroup(body.group_id)
        plan = self.plan_for(group)
        if converted is not None:
            plan.records.extend(converted[1])
            for classic in group.members.values():
                self.touch(group.group_id, classic, now)
        member, new = self._member(plan, body)
        if new:
            self.check_size(plan, member)
        updated = member.replace(
            client_id=body.client_id,
            client_host=body.client_host,
            classic=None,  # a classic member that comes back on the consumer protocol
            **_changed_fields(body),
        )
        reconciled = self.update_member(plan, member, updated, new=new,
                                        owned=_owned(body.topic_partitions), now=now)  # fmt: skip

        full = joining or (
            body.rebalance_timeout_ms != -1
            and body.subscribed_topic_names is not None
            and body.topic_partitions is not None
        )
        changed = dict(reconciled.assigned) != dict(member.assigned)
        self._undo.set(self._last_heard, (group.group_id, reconciled.member_id), ref)
        replies = self.hints_for(plan, reconciled, released=_released(member, reconciled))
        response = api.ConsumerGroupHeartbeatResponse(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            assignment=_topic_partitions(reconciled.assigned) if full or changed else None,
        )
        replies.append(Reply(ref, "ConsumerGroupHeartbeat", body=response))
        return Result(plan.records, replies)

    def update_member(
        self,
        plan: Plan,
        member: ConsumerMember,
        updated: ConsumerMember,
        *,
        new: bool,
        owned: Assignment | None,
        now: int,
    ) -> ConsumerMember:
        """Install a member's new metadata (a new epoch and target when its subscription
        changed or it is new), then move it towards its target; the member reconciled."""
        group = plan.group
        bump = new
        if updated.metadata_differs(member) or new:
            plan.records.append(member_metadata_record(group.group_id, updated))
            bump = bump or (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        plan.members[updated.member_id] = updated
        if bump:
            kind = GroupCauseKind.MEMBER_JOINED if new else GroupCauseKind.SUBSCRIPTION_CHANGED
            self._bump(plan, member_cause(kind, updated))
        elif plan.epoch > plan.target_epoch:
            self._assign(plan)
        reconciled = reconcile(
            updated,
            target_epoch=plan.target_epoch,
            target=plan.targets.get(updated.member_id, EMPTY),
            partition_epoch=group.partition_epoch,
            owned=owned,
            subscribed=group.subscribed_topics(updated, self.topics),
        )
        if reconciled.assignment_differs(member) or member.member_id not in group.members:
            plan.records.append(member_assignment_record(group.group_id, reconciled))
            # Classic members reconcile only when they rejoin: no rebalance timeout.
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS and not reconciled.classic:
                self._schedule_rebalance_timeout(group.group_id, reconciled, now)
            else:
                self._cancel_rebalance_timeout(group.group_id, reconciled.member_id)
        plan.members[reconciled.member_id] = reconciled
        self.touch(group.group_id, reconciled, now)
        return reconciled

    def touch(self, group_id: str, member: ConsumerMember, now: int) -> None:
        """A member was heard from: its session starts again."""
        session_ms = (
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.config.consumer_session_timeout_ms
        )
        self._timers.schedule(session_timer(group_id, member.member_id), now + session_ms)

    def _validate(self, body: ConsumerHeartbeatRequest) -> None:
        def invalid(message: str) -> ProtocolError:
            return ProtocolError(ErrorCode.INVALID_REQUEST, message)

        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        if not body.member_id:
            raise invalid("the member id must not be empty: the client generates it (KIP-1082)")
        if body.instance_id == "":
            raise invalid("the instance id must not be empty")
        if body.rack_id == "":
            raise invalid("the rack id must not be empty")
        epoch = body.member_epoch
        if epoch == JOIN_EPOCH:
            if body.rebalance_timeout_ms == -1:
                raise invalid("rebalance_timeout_ms must be set when joining")
            if body.topic_partitions is None or body.topic_partitions:
                raise invalid("topic_partitions must be empty when joining")
            if not body.subscribed_topic_names and not body.subscribed_topic_regex:
                raise invalid("subscribed_topic_names or subscribed_topic_regex must be set")
        elif epoch == STATIC_LEAVE_EPOCH and body.instance_id is None:
            raise invalid("member epoch -2 (a static member leaving) needs an instance id")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise invalid(f"member epoch {epoch} is invalid")
        if body.rebalance_timeout_ms < -1:
            raise invalid("rebalance_timeout_ms must not be negative")
        if body.subscribed_topic_regex:
            try:
                compile_regex(body.subscribed_topic_regex)
            except re.error as exc:
                raise ProtocolError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"subscribed_topic_regex {body.subscribed_topic_regex!r}: {exc}",
                ) from exc
        if body.server_assignor is not None and body.server_assignor not in self._assignors():
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"server assignor {body.server_assignor!r} is not supported; supported: "
                + ", ".join(self._assignors()),
            )

    def _assignors(self) -> tuple[str, ...]:
        return tuple(a for a in self.config.consumer_assignors if a in SERVER_ASSIGNORS)

    def _member(self, plan: Plan, body: ConsumerHeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat speaks for, checking its identity and epoch, and whether
        it joins the group now (a new member, not a static member coming back)."""
        group = plan.group
        joining = body.member_epoch == JOIN_EPOCH
        if body.instance_id is None:
            member = group.members.get(body.member_id)
            if member is None:
                if not joining:
                    raise _unknown(group.group_id, body.member_id)
                return ConsumerMember(body.member_id), True
            if not joining:
                _check_epoch(member, body)
            return member, False
        static = group.static_member(body.instance_id)
        if not joining:
            if static is None:
                raise _unknown(group.group_id, body.member_id)
            if static.member_id != body.member_id:
                raise _fenced_instance(group.group_id, body.member_id, body.instance_id, static)
            _check_epoch(static, body)
            return static, False
        if static is None:
            if body.member_id in group.members:
                raise ProtocolError(
                    ErrorCode.INVALID_REQUEST,
                    f"member {body.member_id} joined without an instance id; it cannot take "
                    f"instance id {body.instance_id!r}",
                )
            return ConsumerMember(body.member_id), True
        if static.member_id == body.member_id:
            return static, False
        if static.member_epoch != STATIC_LEAVE_EPOCH:
            raise ProtocolError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"static member {body.member_id} with instance id {body.instance_id!r} cannot "
                f"join group {group.group_id!r}: member {static.member_id} still holds it",
            )
        return self.replace_static(plan, static, body.member_id), False

    def replace_static(self, plan: Plan, static: ConsumerMember, member_id: str) -> ConsumerMember:
        """The instance comes back under a new member id: it takes over the old member's
        assignment without a new group epoch (Kafka's replaceMember)."""
        group_id = plan.group.group_id
        replacement = static.replace(member_id=member_id, member_epoch=0,
                                     previous_member_epoch=0)  # fmt: skip
        plan.records.extend(member_tombstones(group_id, static.member_id))
        plan.records.append(member_metadata_record(group_id, replacement))
        target = plan.targets.pop(static.member_id, EMPTY)
        plan.targets[replacement.member_id] = target
        plan.records.append(target_record(group_id, replacement.member_id, target))
        plan.records.append(member_assignment_record(group_id, replacement))
        del plan.members[static.member_id]
        self._cancel_timers(group_id, static.member_id)
        return replacement

    def check_size(self, plan: Plan, member: ConsumerMember) -> None:
        limit = self.config.consumer_max_size
        if limit is None:
            return
        if len(plan.members) >= limit:
            raise ProtocolError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"group {plan.group.group_id!r} has reached its maximum size of {limit} members",
            )

    # ================================================================= epochs and targets

    @staticmethod
    def plan_for(group: ConsumerGroup) -> Plan:
        return Plan(group, dict(group.members), [], group.group_epoch, group.assignment_epoch,
                     dict(group.targets))  # fmt: skip

    def _subscription_metadata(self, plan: Plan) -> dict[str, SubscribedTopic]:
        image = self.topics if self.topics_known else plan.group.subscription_metadata
        topics: set[str] = set()
        for member in plan.members.values():
            topics |= plan.group.subscribed_topics(member, image)
        return {t: image[t] for t in sorted(topics) if t in image}

    def _bump(self, plan: Plan, cause: GroupCause) -> None:
        """A change of membership or subscription: new metadata, epoch (naming ``cause``)
        and target."""
        metadata = self._subscription_metadata(plan)
        if metadata != plan.group.subscription_metadata:
            plan.records.append(subscription_metadata_record(plan.group.group_id,
                                                             metadata.values()))  # fmt: skip
        plan.epoch += 1
        plan.records.append(epoch_record(plan.group.group_id, plan.epoch, cause))
        self._assign(plan, metadata)

    def _assign(self, plan: Plan, metadata: Mapping[str, SubscribedTopic] | None = None) -> None:
        group = plan.group
        if metadata is None:
            metadata = self._subscription_metadata(plan)
        spec: dict[str, dict[str, Any]] = {
            member_id: {
                "topics": sorted(group.subscribed_topics(member, metadata)),
                "assigned": {t: sorted(ps) for t, ps in plan.targets.get(member_id, {}).items()},
                "rack": member.rack_id,
            }
            for member_id, member in plan.members.items()
        }
        preferred = _preferred_assignor(plan.members.values(), self._assignors()[0])
        assign = SERVER_ASSIGNORS[preferred]
        racks = {
            t.topic: {r.partition: list(r.racks) for r in t.racks}
            for t in metadata.values()
            if t.racks
        }
        result = assign(spec, {t: m.num_partitions for t, m in metadata.items()}, racks or None)
        for member_id in sorted(plan.members):
            target = from_lists(result.get(member_id, {}).items())
            if dict(target) != dict(plan.targets.get(member_id, EMPTY)) or (
                member_id not in group.targets
            ):
                plan.records.append(target_record(group.group_id, member_id, target))
            plan.targets[member_id] = target
        plan.target_epoch = plan.epoch
        plan.records.append(target_epoch_record(group.group_id, plan.epoch))

    # ================================================================= leaving and fencing

    def _leave(self, ref: RequestRef, body: ConsumerHeartbeatRequest) -> Result:
        group = self.groups.get(body.group_id)
        if group is None:
            raise _unknown(body.group_id, body.member_id)
        if body.instance_id is None:
            member = group.members.get(body.member_id)
            if member is None:
                raise _unknown(group.group_id, body.member_id)
        else:
            static = group.static_member(body.instance_id)
            if static is None:
                raise _unknown(group.group_id, body.member_id)
            if static.member_id != body.member_id:
                raise _fenced_instance(group.group_id, body.member_id, body.instance_id, static)
            member = static
        response = api.ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=body.member_epoch
        )
        reply = Reply(ref, "ConsumerGroupHeartbeat", body=response)
        if body.member_epoch == STATIC_LEAVE_EPOCH:
            # Gone for a while: it keeps its partitions (nobody else gets them) until its
            # session expires or its instance id comes back.
            leaving = member.replace(member_epoch=STATIC_LEAVE_EPOCH,
                                     previous_member_epoch=member.member_epoch,
                                     pending_revocation=EMPTY)  # fmt: skip
            self._cancel_rebalance_timeout(group.group_id, member.member_id)
            return Result([member_assignment_record(group.group_id, leaving)], [reply])
        records, hints = self.fence_member(group, member.member_id, kind=GroupCauseKind.MEMBER_LEFT)
        return Result(records, [*hints, reply])

    def fence_member(
        self, group: ConsumerGroup, *member_ids: str, kind: str, detail: str | None = None
    ) -> tuple[list[Record], list[Reply]]:
        """The records removing members (the others get one new epoch and target, whose
        cause is ``kind`` about the first of them), and the hints to the members that must
        move."""
        plan = self.plan_for(group)
        if len(member_ids) > 1:
            detail = f"{len(member_ids)} members" + (f"; {detail}" if detail else "")
        cause = member_cause(kind, group.members[member_ids[0]], detail)
        for member_id in member_ids:
            plan.records.extend(member_tombstones(group.group_id, member_id))
            del plan.members[member_id]
            plan.targets.pop(member_id, None)
            self._cancel_timers(group.group_id, member_id)
        self._bump(plan, cause)
        return plan.records, self.hints_for(plan, None, released=True)

    # ================================================================= timers

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerMember, now: int) -> None:
        self._undo.set(self._rebalance_epochs, (group_id, member.member_id), member.member_epoch)
        self._timers.schedule(
            rebalance_timer(group_id, member.member_id), now + member.rebalance_timeout_ms
        )

    def _cancel_rebalance_timeout(self, group_id: str, member_id: str) -> None:
        self._undo.pop(self._rebalance_epochs, (group_id, member_id))
        self._timers.cancel(rebalance_timer(group_id, member_id))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self._timers.cancel(session_timer(group_id, member_id))
        self._cancel_rebalance_timeout(group_id, member_id)
        self._undo.pop(self._last_heard, (group_id, member_id))

    # ================================================================= hints

    def hints_for(
        self, plan: Plan, requester: ConsumerMember | None, *, released: bool = False
    ) -> list[Reply]:
        """Hints to the members an event lets move on: after a new target epoch, every
        member not at it; after partitions were released, every member still waiting.
        Sent once the event's records are durable, like any reply."""
        if plan.target_epoch == plan.group.assignment_epoch and not released:
            return []
        skip = None if requester is None else requester.member_id
        hints = []
        for member_id, member in sorted(plan.members.items()):
            if member_id == skip or member.is_reconciled_to(plan.target_epoch):
                continue
            heard = self._last_heard.get((plan.group.group_id, member_id))
            if heard is None or heard.channel is None:
                continue
            to = RequestRef(heard.client_id, PUSH_CORRELATION_ID, heard.channel)
            hint = api.ConsumerGroupHint(
                group_id=plan.group.group_id, member_id=member_id, group_epoch=plan.epoch
            )
            hints.append(Reply(to, "ConsumerGroupHeartbeat", body=hint))
        return hints

    @staticmethod
    def owns_timer(key: Hashable) -> bool:
        return isinstance(key, tuple) and len(key) == 3 and key[0] in (_SESSION, _REBALANCE)

    def fire(self, key: tuple[str, str, str], now: int) -> Result:
        kind, group_id, member_id = key
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return Result()
        if kind == _REBALANCE:
            epoch = self._undo.pop(self._rebalance_epochs, (group_id, member_id))
            if epoch != member.member_epoch or member.state is not MemberState.UNREVOKED_PARTITIONS:
                return Result()
        detail = "did not revoke its partitions in time" if kind == _REBALANCE else None
        records, hints = self.fence_member(group, member_id, kind=GroupCauseKind.MEMBER_EXPIRED,
                                           detail=detail)  # fmt: skip
        return Result(records, hints)

    # ================================================================= topic metadata

    def learn_topics(self, topics: TopicsImage) -> None:
        """Keep the broker's topics without acting on them (the shard is not active)."""
        self.topics = dict(topics)
        self.topics_known = True

    def on_topics(self, topics: TopicsImage, now: int) -> Result:
        """New broker metadata: a group whose subscribed topics changed gets a new epoch."""
        self.learn_topics(topics)
        records: list[Record] = []
        hints: list[Reply] = []
        for group_id in sorted(self.groups):
            group = self.groups[group_id]
            if group.is_empty:
                continue
            plan = self.plan_for(group)
            metadata = self._subscription_metadata(plan)
            if metadata != group.subscription_metadata:
                self._bump(plan, _topics_changed(group.subscription_metadata, metadata))
                records.extend(plan.records)
                hints.extend(self.hints_for(plan, None))
        return Result(records, hints)

    # ================================================================= reads

    def describe(self, group_id: str) -> api.DescribedConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            return api.DescribedConsumerGroup(
                group_id=group_id,
                error=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"group {group_id!r} is not a consumer group",
            )
        members = [
            api.DescribedConsumerMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                state=m.state.name,
                assignment=_topic_partitions(m.assigned),
                target_assignment=_topic_partitions(group.target(m.member_id)),
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ]
        return api.DescribedConsumerGroup(
            group_id=group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=_preferred_assignor(group.members.values(), self._assignors()[0]),
            members=members,
        )

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: members commit at their epoch."""
        if epoch < 0 and group.is_empty:
            return  # an admin reset or a standalone consumer, while nobody consumes
        member = group.members.get(member_id)
        if member is None:
            raise _unknown(group.group_id, member_id)
        if epoch != member.member_epoch and member.classic is not None:
            raise ProtocolError(
                ErrorCode.ILLEGAL_GENERATION,
                f"member {member_id} committed with generation {epoch}; its generation is "
                f"{member.member_epoch}",
            )
        if epoch != member.member_epoch:
            raise ProtocolError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"member {member_id} committed with epoch {epoch}; its epoch is "
                f"{member.member_epoch}",
            )


def apply_record(group: ConsumerGroup, key: AvroModel, value: AvroModel | None) -> bool:
    """Replay one consumer group record into ``group``; False when the group is deleted."""
    if isinstance(key, ConsumerGroupMetadataKey):
        if value is None:
            return False
        assert isinstance(value, ConsumerGroupMetadataValue)
        group.replay_epoch(value.epoch)
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        assert value is None or isinstance(value, ConsumerGroupPartitionMetadataValue)
        group.replay_subscription_metadata(() if value is None else value.topics)
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        assert value is None or isinstance(value, ConsumerGroupMemberMetadataValue)
        group.replay_member_metadata(key.member_id, value)
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
        group.replay_target_epoch(0 if value is None else value.assignment_epoch)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
        group.replay_target(key.member_id, None if value is None else value.partitions)
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        assert value is None or isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
        group.replay_member_assignment(key.member_id, value)
    else:
        raise TypeError(f"{type(key).__name__} is not a consumer group record")
    return True


def _preferred_assignor(members: Any, default: str) -> str:
    counts: dict[str, int] = {}
    for member in members:
        if member.server_assignor:
            counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
    if not counts:
        return default
    return min(counts, key=lambda name: (-counts[name], name))


def _released(before: ConsumerMember, after: ConsumerMember) -> bool:
    """Whether the member gave up partitions others may be waiting for."""
    if before.assigned is after.assigned and before.pending_revocation is after.pending_revocation:
        return False  # the steady heartbeat: the same assignment objects, nothing released
    return bool(set(before.owned_partitions()) - set(after.owned_partitions()))


def _changed_fields(body: ConsumerHeartbeatRequest) -> dict[str, object]:
    """The fields a heartbeat sets; ``None`` (and -1 for the timeout) mean unchanged."""
    changes: dict[str, object] = {}
    if body.instance_id is not None:
        changes["instance_id"] = body.instance_id
    if body.rack_id is not None:
        changes["rack_id"] = body.rack_id
    if body.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = body.rebalance_timeout_ms
    if body.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(body.subscribed_topic_names)))
    if body.subscribed_topic_regex is not None:
        changes["subscribed_topic_regex"] = body.subscribed_topic_regex or None
    if body.server_assignor is not None:
        changes["server_assignor"] = body.server_assignor
    return changes


def _owned(items: Sequence[TopicPartitionsRequest] | None) -> Assignment | None:
    if items is None:
        return None
    return from_lists((i.topic, i.partitions) for i in items)


def _topic_partitions(assignment: Assignment) -> list[api.HeartbeatTopicPartitions]:
    return [api.HeartbeatTopicPartitions(topic=t, partitions=ps) for t, ps in to_lists(assignment)]


def _check_epoch(member: ConsumerMember, body: ConsumerHeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a stale epoch is fenced, except the
    previous one with a subset of the assignment (the response to it was lost)."""
    received = body.member_epoch
    if received > member.member_epoch:
        raise ProtocolError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"member {member.member_id} sent epoch {received}, newer than the coordinator's "
            f"{member.member_epoch}; it must give up its partitions and rejoin",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch
        or not is_subset(_owned(body.topic_partitions), member.assigned)
    ):
        raise ProtocolError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"member {member.member_id} sent epoch {received}, older than the coordinator's "
            f"{member.member_epoch}; it must give up its partitions and rejoin",
        )


def _unknown(group_id: str, member_id: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id!r}"
    )


def _fenced_instance(
    group_id: str, member_id: str, instance_id: str, static: ConsumerMember
) -> ProtocolError:
    return ProtocolError(
        ErrorCode.FENCED_INSTANCE_ID,
        f"instance id {instance_id!r} of group {group_id!r} belongs to member "
        f"{static.member_id}, not {member_id}",
    )


def _topics_changed(
    before: Mapping[str, SubscribedTopic], after: Mapping[str, SubscribedTopic]
) -> GroupCause:
    """The cause of an epoch bumped by broker metadata: each subscribed topic that
    appeared, went, or changed its partition count (or racks)."""
    changes: list[str] = []
    for topic in sorted(before.keys() | after.keys()):
        old, new = before.get(topic), after.get(topic)
        if new is None:
            changes.append(f"{topic} is gone")
        elif old is None:
            changes.append(f"{topic} appeared ({new.num_partitions} partitions)")
        elif old.num_partitions != new.num_partitions:
            changes.append(f"{topic} {old.num_partitions} -> {new.num_partitions} partitions")
        elif old != new:
            changes.append(f"{topic} racks changed")
    return GroupCause(GroupCauseKind.SUBSCRIBED_TOPIC_CHANGED, detail="; ".join(changes) or None)
