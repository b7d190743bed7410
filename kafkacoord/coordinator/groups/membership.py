"""Kafka's classic group membership protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

:class:`Membership` is the part of :class:`~kafkacoord.coordinator.groups.shard.GroupShard`
that runs rebalances, with the semantics of Kafka's ``GroupMetadataManager`` for classic
groups: member ids handed out with MEMBER_ID_REQUIRED (KIP-394), static members
(``group.instance.id``, KIP-345), the initial delayed join, the rebalance and session
timeouts, the pending-sync timeout, protocol selection and leader election.

Like Kafka, it changes a group's soft state in memory and returns a ``GroupMetadataValue``
record where Kafka writes one: a rebalance that leaves the group Empty, a static member
replaced in a Stable group, and the leader's SyncGroup (whose post-commit action hands out
the assignment). Replies to parked requests come in the :class:`Result` that completes them.

Each entry point that changes a group in place (JoinGroup, SyncGroup, LeaveGroup and the
three timeouts) first saves that group in the shard's undo log; Heartbeat changes only a
deadline, which the timers log themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable, Mapping

from kafkacoord.codecs.models import GroupCause, GroupCauseKind, GroupMetadataValue
from kafkacoord.coordinator.protocol import Empty, ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_commit import HeartbeatRequest
from kafkacoord.coordinator.runtime.shard import Record, Reply, RequestRef, Result

from .causes import member_cause
from .classic_group import ClassicGroup
from .config import GroupConfig
from .member import Member, Protocols
from .records import group_metadata_record
from .scheduling import ShardTimers, heartbeat_timer, join_timer, sync_timer
from .state import GroupState
from .undo import UndoLog

__all__ = ["MemberIdFactory", "Membership", "join_error", "join_reply", "uuid_member_id"]

MemberIdFactory = Callable[[str], str]
"""Makes a new member id from a prefix (the client id, or the group instance id)."""


def uuid_member_id(prefix: str) -> str:
    """Kafka's ``generateMemberId``: prefix, a dash, a random UUID."""
    return f"{prefix}-{uuid.uuid4()}"


def _protocols(body: api.JoinGroup) -> Protocols:
    # Kafka keys a JoinGroup's protocols by name; the first of duplicates wins.
    seen: dict[str, bytes] = {}
    for p in body.protocols:
        seen.setdefault(p.name, p.metadata)
    return tuple(seen.items())


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def join_error(ref: RequestRef, member_id: str, code: ErrorCode, message: str | None) -> Reply:
    """A failed JoinGroup. The body carries a member id: MEMBER_ID_REQUIRED hands out the
    new member's id this way; other errors echo the request's (or "")."""
    return Reply(
        ref,
        "JoinGroup",
        code,
        api.JoinGroupResponse(
            generation_id=-1,
            protocol_type=None,
            protocol_name=None,
            leader="",
            member_id=member_id,
        ),
        message,
    )


def join_reply(
    ref: RequestRef,
    group: ClassicGroup,
    member_id: str,
    *,
    with_members: bool,
    skip_assignment: bool = False,
) -> Reply:
    """A successful JoinGroup: the leader also gets every member's metadata for the chosen
    protocol, which is what its assignor needs."""
    members = (
        [
            api.JoinMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(group.protocol),
            )
            for m in group.members.values()
        ]
        if with_members
        else []
    )
    return Reply(
        ref,
        "JoinGroup",
        body=api.JoinGroupResponse(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            leader=group.leader or "",
            member_id=member_id,
            members=members,
            skip_assignment=skip_assignment,
        ),
    )


class Membership:
    """Rebalances of the shard's classic groups."""

    def __init__(self, config: GroupConfig, groups: dict[str, ClassicGroup], timers: ShardTimers,
                 new_member_id: MemberIdFactory, undo: UndoLog) -> None:  # fmt: skip
        self.config = config
        self._groups = groups  # shared with the shard
        self._timers = timers
        self._new_member_id = new_member_id
        self._undo = undo

    def _keep(self, group_id: str) -> None:
        """Save the group ``group_id`` (or its absence) before changing it in place."""
        if not self._undo.open:
            return
        group = self._groups.get(group_id)
        if group is None:
            self._undo.add(functools.partial(self._groups.pop, group_id, None))
        else:
            self._undo.add(functools.partial(_put_back, self._groups, group, group.save()))

    # ================================================================= lifecycle

    def unload(self) -> list[Reply]:
        """The shard moves away: every parked JoinGroup/SyncGroup gets NOT_COORDINATOR."""
        replies: list[Reply] = []
        moved = "the group's coordinator moved"
        for group in self._groups.values():
            for member in group.members.values():
                if member.join_ref is not None:
                    replies.append(
                        join_error(
                            member.join_ref, member.member_id, ErrorCode.NOT_COORDINATOR, moved
                        )
                    )
                    member.join_ref = None
                if member.sync_ref is not None:
                    replies.append(
                        Reply(member.sync_ref, "SyncGroup", ErrorCode.NOT_COORDINATOR, None, moved)
                    )
                    member.sync_ref = None
            group.transition(GroupState.DEAD, None)
        return replies

    # ================================================================= timers

    def schedule_heartbeat(self, group: ClassicGroup, member_id: str, deadline_ms: int) -> None:
        self._timers.schedule(heartbeat_timer(group.group_id, member_id), deadline_ms)

    def cancel_group_timers(self, group: ClassicGroup) -> None:
        self._timers.cancel(join_timer(group.group_id))
        self._timers.cancel(sync_timer(group.group_id))
        for member_id in [*group.members, *group.pending_members]:
            self._timers.cancel(heartbeat_timer(group.group_id, member_id))

    def expire_heartbeat(self, group_id: str, member_id: str, now: int) -> Result:
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return Result()
        self._keep(group_id)
        if group.is_pending(member_id):
            # A member told MEMBER_ID_REQUIRED never came back.
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                return self._complete_join(group, now)
            return Result()
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return Result()
        cause = member_cause(
            GroupCauseKind.MEMBER_EXPIRED,
            member,
            f"no heartbeat in its {member.session_timeout_ms} ms session",
        )
        return self._remove_member_and_update_group(group, member, now, cause)

    def expire_join(self, group_id: str, now: int) -> Result:
        group = self._groups.get(group_id)
        if group is None or group.state is not GroupState.PREPARING_REBALANCE:
            return Result()
        self._keep(group_id)
        if group.initial_delay is not None:
            return self._try_complete_initial_rebalance(group, *group.initial_delay, now)
        return self._complete_join(group, now)

    def _try_complete_initial_rebalance(
        self, group: ClassicGroup, delay_ms: int, remaining_ms: int, now: int
    ) -> Result:
        # Kafka's InitialDelayedJoin: each new member extends the wait by up to the delay,
        # never past the group's rebalance timeout.
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            group.initial_delay = (new_delay, new_remaining)
            self._timers.schedule(join_timer(group.group_id), now + new_delay)
            return Result()
        return self._complete_join(group, now)

    def expire_sync(self, group_id: str, now: int) -> Result:
        group = self._groups.get(group_id)
        if group is None or group.sync_generation != group.generation:
            return Result()
        self._keep(group_id)
        if (
            group.in_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            and group.pending_sync
        ):
            gone = sorted(group.pending_sync)
            cause = member_cause(
                GroupCauseKind.SYNC_EXPIRED,
                group.members[gone[0]],
                f"{len(gone)} member(s) sent no SyncGroup in time",
            )
            for member_id in gone:
                self._timers.cancel(heartbeat_timer(group.group_id, member_id))
                group.remove(member_id)
            return self.prepare_rebalance(group, now, cause)
        return Result()

    # ================================================================= rebalance machinery

    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, now: int, cause: GroupCause
    ) -> Result:
        if group.can_rebalance():
            return self.prepare_rebalance(group, now, cause)
        return self._maybe_complete_join_phase(group, now)

    def prepare_rebalance(self, group: ClassicGroup, now: int, cause: GroupCause) -> Result:
        """Start a rebalance; ``cause`` is what the records of its outcome will name."""
        result = Result()
        group.rebalance_cause = cause
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Members parked in SyncGroup must rejoin.
            for member in group.members.values():
                member.assignment = b""
            result.replies.extend(
                self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, now)
            )
        group.pending_sync.clear()
        group.sync_generation = None
        self._timers.cancel(sync_timer(group.group_id))

        initial = group.state is GroupState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.initial_delay = (delay, remaining)
            group.new_member_added = False
            self._timers.schedule(join_timer(group.group_id), now + delay)
        group.transition(GroupState.PREPARING_REBALANCE, now)
        if not initial:
            result.extend(self._maybe_complete_join_else_schedule(group, now))
        return result

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, now: int) -> Result:
        if group.has_all_members_joined():
            return self._complete_join(group, now)
        group.initial_delay = None
        self._timers.schedule(join_timer(group.group_id), now + group.rebalance_timeout_ms())
        return Result()

    def _maybe_complete_join_phase(self, group: ClassicGroup, now: int) -> Result:
        if (
            group.state is not GroupState.PREPARING_REBALANCE
            # The initial rebalance completes only when its delay runs out.
            or group.previous_state is GroupState.EMPTY
            or not group.has_all_members_joined()
        ):
            return Result()
        return self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: int) -> Result:
        self._timers.cancel(join_timer(group.group_id))
        group.initial_delay = None
        for member in group.not_yet_rejoined():
            # Dynamic members that did not rejoin in time are gone; static ones stay, and
            # their session timeout decides.
            if not member.is_static:
                self._timers.cancel(heartbeat_timer(group.group_id, member.member_id))
                group.remove(member.member_id)

        if group.state is GroupState.DEAD:
            return Result()
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait another round.
            self._timers.schedule(join_timer(group.group_id), now + group.rebalance_timeout_ms())
            return Result()

        group.init_next_generation(now)
        if group.state is GroupState.EMPTY:
            return Result(records=[self._snapshot(group, now)])

        replies: list[Reply] = []
        for member in group.members.values():
            if member.join_ref is not None:
                replies.append(
                    join_reply(
                        member.join_ref,
                        group,
                        member.member_id,
                        with_members=group.is_leader(member.member_id),
                    )
                )
                member.join_ref = None
            self.schedule_heartbeat(group, member.member_id, now + member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_generation = group.generation
        self._timers.schedule(sync_timer(group.group_id), now + group.rebalance_timeout_ms())
        return Result(replies=replies)

    def _snapshot(
        self,
        group: ClassicGroup,
        state_timestamp_ms: int,
        assignments: Mapping[str, bytes] | None = None,
    ) -> Record:
        """The group's snapshot record; the group remembers it as its persisted one."""
        record = group_metadata_record(group, state_timestamp_ms, assignments)
        assert isinstance(record.value, GroupMetadataValue)
        group.persisted = record.value  # soft state: see ClassicGroup.persisted
        return record

    def _assignment_durable(
        self, group: ClassicGroup, value: GroupMetadataValue | None, now: int
    ) -> list[Reply]:
        """Post-commit (Kafka's SyncGroup append future): the leader's assignment is durable,
        so members get it and the group is Stable. Members that synced meanwhile are
        answered now. A rebalance that began meanwhile has superseded it: nothing to do."""
        if (
            value is None
            or self._groups.get(group.group_id) is not group
            or group.state is not GroupState.COMPLETING_REBALANCE
            or group.generation != value.generation
        ):
            return []
        assignments = {m.member_id: m.assignment for m in value.members}
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        group.transition(GroupState.STABLE, value.state_timestamp_ms)
        return self._propagate_assignment(group, ErrorCode.NONE, now)

    def _propagate_assignment(
        self,
        group: ClassicGroup,
        error: ErrorCode,
        now: int,
        assignments: Mapping[str, bytes] | None = None,
    ) -> list[Reply]:
        """Answer every parked SyncGroup; their senders' sessions restart now."""
        replies: list[Reply] = []
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            if member.sync_ref is None:
                continue
            assignment = (
                member.assignment if assignments is None else assignments.get(member.member_id, b"")
            )
            replies.append(
                Reply(
                    member.sync_ref,
                    "SyncGroup",
                    error,
                    api.SyncGroupResponse(
                        protocol_type=group.protocol_type if ok else None,
                        protocol_name=group.protocol if ok else None,
                        assignment=assignment,
                    ),
                    None if ok else "the group is rebalancing; rejoin",
                )
            )
            member.sync_ref = None
            self.schedule_heartbeat(group, member.member_id, now + member.session_timeout_ms)
        return replies

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now: int, cause: GroupCause
    ) -> Result:
        result = Result(replies=self._detach(group, member))
        if group.in_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            result.extend(self._maybe_prepare_rebalance_or_complete_join(group, now, cause))
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            result.extend(self._complete_join(group, now))
        return result

    def _detach(self, group: ClassicGroup, member: Member) -> list[Reply]:
        """Remove a member, answering its parked requests so its client rejoins."""
        replies: list[Reply] = []
        if member.join_ref is not None:
            replies.append(
                join_error(
                    member.join_ref,
                    "",
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"member {member.member_id} was removed from group {group.group_id!r}",
                )
            )
            member.join_ref = None
        if member.sync_ref is not None:
            replies.append(
                Reply(
                    member.sync_ref,
                    "SyncGroup",
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    None,
                    f"member {member.member_id} was removed from group {group.group_id!r}",
                )
            )
            member.sync_ref = None
        self._timers.cancel(heartbeat_timer(group.group_id, member.member_id))
        group.remove(member.member_id)
        return replies

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.in_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not (
            group.pending_sync
        ):
            group.sync_generation = None
            self._timers.cancel(sync_timer(group.group_id))

    # ================================================================= JoinGroup

    def join_group(self, ref: RequestRef, body: api.JoinGroup, now: int) -> Result:
        if not body.group_id:
            return self._join_result(
                ref, body.member_id, ErrorCode.INVALID_GROUP_ID, "the group id must not be empty"
            )
        cfg = self.config
        if not cfg.min_session_timeout_ms <= body.session_timeout_ms <= cfg.max_session_timeout_ms:
            return self._join_result(
                ref,
                body.member_id,
                ErrorCode.INVALID_SESSION_TIMEOUT,
                f"session timeout {body.session_timeout_ms} ms is outside "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}] "
                "(group.min/max.session.timeout.ms)",
            )
        self._keep(body.group_id)
        group = self._groups.get(body.group_id)
        created = group is None
        if group is None:
            if body.member_id:
                return self._join_result(
                    ref,
                    body.member_id,
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group {body.group_id!r} does not exist; rejoin without a member id",
                )
            group = self._groups[body.group_id] = ClassicGroup(body.group_id)

        if not self._accept_joining_member(group, body.member_id):
            result = Result()
            member = group.members.get(body.member_id)
            if member is not None:
                result.replies.extend(self._detach(group, member))
            elif group.is_pending(body.member_id):
                self._timers.cancel(heartbeat_timer(group.group_id, body.member_id))
                group.remove(body.member_id)
            result.replies.append(
                join_error(
                    ref,
                    "",
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"group {group.group_id!r} has reached group.max.size={cfg.max_size}",
                )
            )
            result.extend(self._maybe_complete_join_phase(group, now))
        elif not body.member_id:
            result = self._join_new_member(ref, body, group, now)
        else:
            result = self._join_existing_member(ref, body, group, now)

        if created and not group.members and not group.pending_members:
            # A failed first join leaves nothing behind.
            self._groups.pop(group.group_id, None)
        return result

    def _join_result(
        self, ref: RequestRef, member_id: str, code: ErrorCode, message: str
    ) -> Result:
        return Result(replies=[join_error(ref, member_id, code, message)])

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if limit is None or group.in_state(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            # Counting members already parked lets the last ones to rejoin be turned away.
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or (
                group.num_awaiting_join() < limit
            )
        return group.has_member(member_id) or len(group.members) < limit

    @staticmethod
    def _rebalance_timeout(body: api.JoinGroup) -> int:
        # JoinGroup v0 had no rebalance timeout: the session timeout served as both.
        return (
            body.rebalance_timeout_ms if body.rebalance_timeout_ms >= 0 else body.session_timeout_ms
        )

    def _join_new_member(
        self, ref: RequestRef, body: api.JoinGroup, group: ClassicGroup, now: int
    ) -> Result:
        if group.state is GroupState.DEAD:
            return self._join_result(
                ref,
                "",
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"group {group.group_id!r} is being removed",
            )
        protocols = _protocols(body)
        if not group.supports_protocols(body.protocol_type, (n for n, _ in protocols)):
            return self._join_result(
                ref, "", ErrorCode.INCONSISTENT_GROUP_PROTOCOL, self._inconsistency(group, body)
            )
        instance_id = body.group_instance_id
        prefix = instance_id if instance_id is not None else (body.client_id or ref.client_id)
        new_id = self._new_member_id(prefix)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                return self._replace_static_member(
                    ref, body, group, now, old_id=existing, new_id=new_id
                )
            return self._add_member_and_rebalance(ref, body, group, new_id, now)
        # KIP-394: a dynamic member first gets its id, then joins with it.
        group.add_pending(new_id)
        self.schedule_heartbeat(group, new_id, now + body.session_timeout_ms)
        return self._join_result(
            ref, new_id, ErrorCode.MEMBER_ID_REQUIRED, "rejoin with the member id given"
        )

    @staticmethod
    def _inconsistency(group: ClassicGroup, body: api.JoinGroup) -> str:
        if group.is_empty:
            return "a JoinGroup needs a non-empty protocol type and at least one protocol"
        if group.protocol_type != body.protocol_type:
            return (
                f"protocol type {body.protocol_type!r} differs from the group's "
                f"{group.protocol_type!r}"
            )
        return (
            f"none of the protocols {[p.name for p in body.protocols]} is supported by every "
            f"member of group {group.group_id!r} (common: {sorted(group.candidate_protocols())})"
        )

    def _join_existing_member(
        self, ref: RequestRef, body: api.JoinGroup, group: ClassicGroup, now: int
    ) -> Result:
        member_id = body.member_id
        if group.state is GroupState.DEAD:
            return self._join_result(
                ref,
                member_id,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"group {group.group_id!r} is being removed",
            )
        protocols = _protocols(body)
        if not group.supports_protocols(body.protocol_type, (n for n, _ in protocols)):
            return self._join_result(
                ref,
                member_id,
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                self._inconsistency(group, body),
            )
        if group.is_pending(member_id):
            if body.group_instance_id is not None:
                return self._join_result(
                    ref,
                    member_id,
                    ErrorCode.INVALID_REQUEST,
                    f"{member_id} was handed out to a dynamic member; a static member "
                    "joins with an empty member id",
                )
            return self._add_member_and_rebalance(ref, body, group, member_id, now)
        try:
            member = group.validate_member(member_id, body.group_instance_id)
        except ProtocolError as exc:
            return self._join_result(ref, member_id, exc.code, exc.message or exc.code.name)

        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(ref, body, group, member, now)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retry of a join whose response was lost: same generation again.
                return Result(
                    replies=[
                        join_reply(ref, group, member_id, with_members=group.is_leader(member_id))
                    ]
                )
            return self._update_member_and_rebalance(ref, body, group, member, now)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader's JoinGroup forces a rebalance (e.g. topic metadata changed).
                return self._update_member_and_rebalance(ref, body, group, member, now)
            return Result(replies=[join_reply(ref, group, member_id, with_members=False)])
        return self._join_result(
            ref,
            member_id,
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"group {group.group_id!r} is {state}; rejoin without a member id",
        )

    def _add_member_and_rebalance(
        self, ref: RequestRef, body: api.JoinGroup, group: ClassicGroup, member_id: str, now: int
    ) -> Result:
        member = Member(
            member_id=member_id,
            group_instance_id=body.group_instance_id,
            client_id=body.client_id or ref.client_id,
            client_host=body.client_host,
            rebalance_timeout_ms=self._rebalance_timeout(body),
            session_timeout_ms=body.session_timeout_ms,
            protocol_type=body.protocol_type,
            protocols=_protocols(body),
            join_ref=ref,
            is_new=True,
        )
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is GroupState.EMPTY
        ):
            group.new_member_added = True
        group.add(member)
        # A new member has no session yet: bound its parked JoinGroup instead.
        self.schedule_heartbeat(group, member_id, now + self.config.new_member_join_timeout_ms)
        cause = member_cause(GroupCauseKind.MEMBER_JOINED, member)
        return self._maybe_prepare_rebalance_or_complete_join(group, now, cause)

    def _update_member_and_rebalance(
        self, ref: RequestRef, body: api.JoinGroup, group: ClassicGroup, member: Member, now: int
    ) -> Result:
        protocols = _protocols(body)
        kind = (
            GroupCauseKind.MEMBER_REJOINED
            if member.matches(protocols)
            else GroupCauseKind.SUBSCRIPTION_CHANGED
        )
        group.update_member(
            member, protocols, self._rebalance_timeout(body), body.session_timeout_ms, ref
        )
        cause = member_cause(kind, member)
        return self._maybe_prepare_rebalance_or_complete_join(group, now, cause)

    def _replace_static_member(
        self,
        ref: RequestRef,
        body: api.JoinGroup,
        group: ClassicGroup,
        now: int,
        *,
        old_id: str,
        new_id: str,
    ) -> Result:
        """A known static member rejoined without its member id (e.g. after a restart)."""
        instance_id = body.group_instance_id
        assert instance_id is not None
        fenced = f"static member {instance_id!r} rejoined as {new_id}; {old_id} is fenced"
        result = Result()
        old = group.members[old_id]
        # Fence the previous incarnation at once if it has a request parked.
        if old.join_ref is not None:
            result.replies.append(
                join_error(old.join_ref, old_id, ErrorCode.FENCED_INSTANCE_ID, fenced)
            )
            old.join_ref = None
        if old.sync_ref is not None:
            result.replies.append(
                Reply(old.sync_ref, "SyncGroup", ErrorCode.FENCED_INSTANCE_ID, None, fenced)
            )
            old.sync_ref = None
        self._timers.cancel(heartbeat_timer(group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.schedule_heartbeat(group, new_id, now + member.session_timeout_ms)
        group.update_member(
            member, _protocols(body), self._rebalance_timeout(body), body.session_timeout_ms, ref
        )

        cause = member_cause(GroupCauseKind.STATIC_MEMBER_REPLACED, member, f"replaced {old_id}")
        if group.state is GroupState.STABLE:
            if (group.protocol or "") == group.select_protocol():
                # Same protocol: no rebalance; persist the new member id, then answer. The
                # leader learns it leads but keeps the current assignment (skip_assignment).
                record = self._snapshot(
                    group, now if group.state_timestamp_ms is None else group.state_timestamp_ms
                )
                is_leader = group.is_leader(new_id)
                member.join_ref = None
                result.records.append(record)
                result.replies.append(
                    join_reply(
                        ref, group, new_id, with_members=is_leader, skip_assignment=is_leader
                    )
                )
                return result
            return result.extend(self._maybe_prepare_rebalance_or_complete_join(group, now, cause))
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already have assigned the old id: rebalance.
            return result.extend(self.prepare_rebalance(group, now, cause))
        return result.extend(self._maybe_complete_join_phase(group, now))

    # ================================================================= SyncGroup / Heartbeat

    def sync_group(self, ref: RequestRef, body: api.SyncGroup, now: int) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        group = self._groups.get(body.group_id)
        if group is None or group.is_empty:
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"group {body.group_id!r} has no members; rejoin",
            )
        if group.state is GroupState.DEAD:
            raise ProtocolError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group is being removed")
        member = group.validate_member(body.member_id, body.group_instance_id)
        if body.generation_id != group.generation:
            raise ProtocolError(
                ErrorCode.ILLEGAL_GENERATION,
                f"generation {body.generation_id} is not the group's {group.generation}",
            )
        self._keep(group.group_id)
        if _inconsistent(body.protocol_type, group.protocol_type) or _inconsistent(
            body.protocol_name, group.protocol
        ):
            raise ProtocolError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"group uses {group.protocol_type}/{group.protocol}, the request names "
                f"{body.protocol_type}/{body.protocol_name}",
            )
        if group.state is GroupState.PREPARING_REBALANCE:
            raise ProtocolError(ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing; rejoin")

        if group.state is GroupState.COMPLETING_REBALANCE:
            member.sync_ref = ref  # parked until the leader's assignment is durable
            self._remove_pending_sync(group, member.member_id)
            if not group.is_leader(member.member_id):
                return Result()
            given = {a.member_id: a.assignment for a in body.assignments}
            assignments = {mid: given.get(mid, b"") for mid in group.members}
            record = self._snapshot(group, now, assignments)
            replies = self._propagate_assignment(group, ErrorCode.NONE, now, assignments)
            stable = functools.partial(self._assignment_durable, group, group.persisted, now)
            return Result([record], replies, [stable])

        # Stable: the current assignment.
        self._remove_pending_sync(group, member.member_id)
        return Result(
            replies=[
                Reply(
                    ref,
                    "SyncGroup",
                    body=api.SyncGroupResponse(
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol,
                        assignment=member.assignment,
                    ),
                )
            ]
        )

    def heartbeat(self, ref: RequestRef, body: HeartbeatRequest, now: int) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        group = self._groups.get(body.group_id)
        if group is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"group {body.group_id!r} does not exist"
            )
        if group.state is GroupState.DEAD:
            raise ProtocolError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group is being removed")
        member = group.validate_member(body.member_id, body.group_instance_id)
        if body.generation_id != group.generation:
            raise ProtocolError(
                ErrorCode.ILLEGAL_GENERATION,
                f"generation {body.generation_id} is not the group's {group.generation}",
            )
        self.schedule_heartbeat(group, member.member_id, now + member.session_timeout_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return Result(
                replies=[
                    Reply(
                        ref,
                        "Heartbeat",
                        ErrorCode.REBALANCE_IN_PROGRESS,
                        Empty(),
                        "the group is rebalancing; rejoin",
                    )
                ]
            )
        return Result(replies=[Reply(ref, "Heartbeat", body=Empty())])

    # ================================================================= LeaveGroup

    def leave_group(self, ref: RequestRef, body: api.LeaveGroup, now: int) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        group = self._groups.get(body.group_id)
        if group is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"group {body.group_id!r} does not exist"
            )
        if group.state is GroupState.DEAD:
            raise ProtocolError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group is being removed")
        self._keep(group.group_id)

        result = Result()
        outcomes: list[api.MemberResult] = []
        left = False
        causes: list[GroupCause] = []
        for ident in body.members:
            error = ErrorCode.NONE
            if not ident.member_id:
                # Admin removal by group instance id.
                member_id = group.static_member_id(ident.group_instance_id)
                if member_id is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    removed = group.members[member_id]
                    causes.append(member_cause(GroupCauseKind.MEMBER_REMOVED, removed,
                                               f"removed by client {ref.client_id}"))  # fmt: skip
                    result.replies.extend(self._detach(group, removed))
            elif group.is_pending(ident.member_id):
                causes.append(GroupCause(GroupCauseKind.MEMBER_LEFT, member_id=ident.member_id,
                                         detail="before it joined"))  # fmt: skip
                self._timers.cancel(heartbeat_timer(group.group_id, ident.member_id))
                group.remove(ident.member_id)
            else:
                try:
                    member = group.validate_member(ident.member_id, ident.group_instance_id)
                except ProtocolError as exc:
                    error = exc.code
                else:
                    causes.append(member_cause(GroupCauseKind.MEMBER_LEFT, member))
                    result.replies.extend(self._detach(group, member))
            left = left or error is ErrorCode.NONE
            outcomes.append(
                api.MemberResult(
                    member_id=ident.member_id,
                    group_instance_id=ident.group_instance_id,
                    error=error,
                )
            )
        if left:
            if group.in_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                result.extend(self._maybe_prepare_rebalance_or_complete_join(
                    group, now, _first_of(causes)))  # fmt: skip
            elif group.state is GroupState.PREPARING_REBALANCE:
                result.extend(self._maybe_complete_join_phase(group, now))
        result.replies.append(
            Reply(ref, "LeaveGroup", body=api.LeaveGroupResponse(members=outcomes))
        )
        return result


def _put_back(groups: dict[str, ClassicGroup], group: ClassicGroup, saved: ClassicGroup) -> None:
    group.restore(saved)
    groups[group.group_id] = group


def _first_of(causes: list[GroupCause]) -> GroupCause:
    """One cause for several members leaving at once: the first, counting the others."""
    first = causes[0]
    if len(causes) == 1:
        return first
    return dataclasses.replace(first, detail=f"{len(causes)} members left")
