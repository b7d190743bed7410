"""A classic-protocol consumer group (Kafka's ``ClassicGroup``).

Its states and transition table are in :mod:`.state`, its members in :mod:`.member`.

The group object holds Kafka's *soft* state: membership during a rebalance, parked
JoinGroup/SyncGroup requests, pending members and the in-flight generation. Kafka keeps
exactly this in memory and persists a snapshot (``GroupMetadataValue``) only at a few points;
:attr:`ClassicGroup.persisted` is the last snapshot replayed. :meth:`ClassicGroup.from_record`
is how a loaded shard rebuilds a group from its snapshot: with members it is Stable, without
it is Empty (Kafka's ``GroupMetadataManager.replay``).

Nothing here does I/O or reads a clock: times come in as arguments.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkacoord.codecs.models import GroupCause, GroupMember, GroupMetadataValue
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.runtime.shard import RequestRef

from .assignors.javacompat import java_hashmap_order
from .consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_subscription
from .member import Member, MemberSnapshot, Protocols
from .partitioning import java_string_hash
from .state import GroupState, IllegalStateTransitionError, can_transition

__all__ = ["ClassicGroup", "GroupSnapshot"]


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A read-only view of a group, comparable between a live and a reloaded shard."""

    group_id: str
    state: GroupState
    generation: int
    protocol_type: str
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int | None
    members: tuple[MemberSnapshot, ...] = field(default=())

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> GroupSnapshot:
        """What a shard that loads ``value`` shows for the group."""
        return ClassicGroup.from_record(group_id, value).snapshot()


class ClassicGroup:
    """A consumer group of the classic protocol, with Kafka's states and transitions."""

    def __init__(
        self,
        group_id: str,
        *,
        state: GroupState = GroupState.EMPTY,
        generation: int = 0,
        protocol_type: str | None = None,
        protocol: str | None = None,
        leader: str | None = None,
        state_timestamp_ms: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp_ms = state_timestamp_ms
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.leader = leader
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        # Dynamic members told MEMBER_ID_REQUIRED that have not joined yet (an ordered set).
        self.pending_members: dict[str, None] = {}
        # Members of the new generation that have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        # Initial rebalance (InitialDelayedJoin): another member joined during the delay.
        self.new_member_added = False
        # (delay, remaining) while the join timer is an initial delayed join.
        self.initial_delay: tuple[int, int] | None = None
        # The generation the pending-sync timer was armed for.
        self.sync_generation: int | None = None
        # Topics the members subscribe to, known at the last generation (consumer groups).
        self.subscribed_topics: frozenset[str] | None = None
        # The last snapshot loaded or written for this group: durable, or on its way (a
        # failed append reloads the shard, so "on its way" never outlives a failure).
        self.persisted: GroupMetadataValue | None = None
        # What started the last rebalance: the records of its outcome name it. Soft and
        # informational (a loaded group has none until its next rebalance).
        self.rebalance_cause: GroupCause | None = None

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """Rebuild a group from its snapshot: Stable with members, Empty without."""
        group = cls(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol=value.protocol,
            leader=value.leader,
            state_timestamp_ms=value.state_timestamp_ms if value.state_timestamp_ms >= 0 else None,
        )
        for m in value.members:
            protocols: Protocols = (
                ((value.protocol, m.subscription),) if value.protocol is not None else ()
            )
            group._put(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    # Kafka: a record without a rebalance timeout (v0) uses the session's.
                    rebalance_timeout_ms=(
                        m.rebalance_timeout_ms
                        if m.rebalance_timeout_ms >= 0
                        else m.session_timeout_ms
                    ),
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = group.compute_subscribed_topics()
        group.persisted = value
        return group

    # ----------------------------------------------------------------- undo

    def save(self) -> ClassicGroup:
        """A copy to :meth:`restore` if a handler that changes the group fails. Its
        containers and members are new; every other field is immutable, so shared."""
        saved = copy.copy(self)
        saved.members = {member_id: copy.copy(m) for member_id, m in self.members.items()}
        saved.static_members = dict(self.static_members)
        saved.pending_members = dict(self.pending_members)
        saved.pending_sync = set(self.pending_sync)
        return saved

    def restore(self, saved: ClassicGroup) -> None:
        """Become ``saved`` again, in place: a post-commit action may hold this object."""
        self.__dict__.update(saved.__dict__)

    # ----------------------------------------------------------------- state

    def in_state(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def is_simple(self) -> bool:
        """A "simple" group: offsets only, never joined (no protocol type)."""
        return self.protocol_type is None

    def transition(self, target: GroupState, now_ms: int | None) -> None:
        if not can_transition(self.state, target):
            raise IllegalStateTransitionError(
                f"group {self.group_id!r} cannot move from {self.state} to {target}"
            )
        self.previous_state = self.state
        self.state = target
        if now_ms is not None:
            self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return can_transition(self.state, GroupState.PREPARING_REBALANCE)

    # ----------------------------------------------------------------- membership

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader is not None and self.leader == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending(self, member_id: str) -> None:
        if member_id in self.members:
            raise ValueError(f"{member_id} is already a member of {self.group_id!r}")
        self.pending_members[member_id] = None

    def _put(self, member: Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member

    def add(self, member: Member) -> None:
        """Add a joining member; the first member fixes the group's protocol type."""
        if member.group_instance_id is not None and member.group_instance_id in self.static_members:
            raise ValueError(
                f"static member {member.group_instance_id!r} is already in {self.group_id!r}"
            )
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group's and the member's protocol types differ")
        self._put(member)
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member or pending member; a removed leader passes to the next member."""
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id, keeping everything else (its position in
        the group too, so the leader's member list keeps its order)."""
        old = self.members[old_id]
        new = Member(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members = {
            (new_id if k == old_id else k): (new if k == old_id else v)
            for k, v in self.members.items()
        }
        if self.is_leader(old_id):
            self.leader = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return new

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_ref: RequestRef | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_ref = join_ref

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def validate_member(self, member_id: str, instance_id: str | None) -> Member:
        """Kafka's ``validateMember``: a known instance id must map to this member id."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group instance id {instance_id!r} is not a member of {self.group_id!r}",
                )
            if existing != member_id:
                raise ProtocolError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"member id {member_id!r} of static member {instance_id!r} is fenced "
                    f"by the newer member id {existing!r}",
                )
        member = self.members.get(member_id)
        if member is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"member {member_id!r} is not a member of group {self.group_id!r}",
            )
        return member

    # ----------------------------------------------------------------- join phase

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        """The group's rebalance timeout: the largest of its members'."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader is None:
            return False
        current = self.members.get(self.leader)
        if current is not None and current.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader = member.member_id
                return True
        return False

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names())
        for member in members:
            common.intersection_update(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ``supportsProtocols``: any group accepts a non-empty type and protocol list
        while Empty; otherwise the type must match and one protocol be supported by all."""
        wanted = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(wanted)
        if self.protocol_type != protocol_type:
            return False
        if not self.members:
            # Kafka counts supporters: with no members every protocol has all 0 of them.
            return bool(wanted)
        return bool(wanted & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The candidate protocol with the most member votes (ties as Java's HashMap order)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id!r}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Kafka: stream over a HashMap<String, Integer>, max() keeps the first maximum.
        best: str | None = None
        for name in java_hashmap_order(votes, java_string_hash):
            if best is None or votes[name] > votes[best]:
                best = name
        assert best is not None
        return best

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation: CompletingRebalance with a protocol, or Empty without members."""
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol = None
            self.transition(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync.clear()

    # ----------------------------------------------------------------- subscriptions

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics of a consumer group's members; ``None`` when not knowable (not a consumer
        group, no protocol yet, or metadata that is not the consumer protocol)."""
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol)).topics)
        except (ConsumerProtocolError, ValueError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """When the topics are unknown, a consumer group counts as subscribed (Kafka)."""
        if self.subscribed_topics is None:
            return self.protocol_type == PROTOCOL_TYPE
        return topic in self.subscribed_topics

    # ----------------------------------------------------------------- offsets rules

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int
    ) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit`` for a non-transactional commit."""
        if self.state is GroupState.DEAD:
            raise ProtocolError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id!r} is dead"
            )
        if generation < 0 and self.state is GroupState.EMPTY:
            # An admin client or a standalone consumer: allowed while nobody is a member.
            return
        if generation >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation != self.generation:
                raise ProtocolError(
                    ErrorCode.ILLEGAL_GENERATION,
                    f"generation {generation} is not the current generation {self.generation} "
                    f"of group {self.group_id!r}",
                )
        else:
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"group {self.group_id!r} is {self.state}: a commit without member id and "
                "generation is allowed only while the group is Empty",
            )
        if self.state is GroupState.COMPLETING_REBALANCE:
            raise ProtocolError(
                ErrorCode.REBALANCE_IN_PROGRESS,
                f"group {self.group_id!r} is completing a rebalance; commit after SyncGroup",
            )

    # ----------------------------------------------------------------- records and views

    def to_record(
        self, state_timestamp_ms: int, assignments: Mapping[str, bytes] | None = None
    ) -> GroupMetadataValue:
        """The snapshot Kafka writes: members with the selected protocol's metadata and their
        assignment (``assignments`` overrides, e.g. the leader's new one at SyncGroup)."""
        members = tuple(
            GroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(self.protocol) if self.protocol is not None else b"",
                assignment=(
                    m.assignment if assignments is None else assignments.get(m.member_id, b"")
                ),
                group_instance_id=m.group_instance_id,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            state_timestamp_ms=state_timestamp_ms,
            members=members,
            protocol=self.protocol,
            leader=self.leader,
            cause=self.rebalance_cause,
        )

    def snapshot(self) -> GroupSnapshot:
        return GroupSnapshot(
            group_id=self.group_id,
            state=self.state,
            generation=self.generation,
            protocol_type=self.protocol_type or "",
            protocol=self.protocol,
            leader=self.leader,
            state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberSnapshot(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    metadata=(
                        m.metadata(self.protocol)
                        if self.protocol is not None and self.protocol in m.protocol_names()
                        else b""
                    ),
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )
