"""A KIP-848 consumer group as replay builds it (Kafka's ``ConsumerGroup``).

Hard state: every field is changed by :meth:`ConsumerGroup.replay_*` from a durable record,
on writes and on loads alike, in any order of the records of different keys (a member is
created by whichever of its records comes first).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

from kafkacoord.codecs.models import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    SubscribedTopic,
    TopicPartitions,
)

from .assignment import EMPTY, Assignment, from_records
from .member import LEAVE_EPOCH, ConsumerMember

__all__ = ["ConsumerGroup", "ConsumerGroupState", "compile_regex"]


class ConsumerGroupState(str, enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``; the value is Kafka's display name."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription regex, matched against whole topic names as Kafka's RE2J ``matches``."""
    return re.compile(pattern)


class ConsumerGroup:
    """A consumer group (Kafka's ``ConsumerGroup``): its group epoch, the epoch of its
    target assignment (``assignment_epoch``), its members and static member ids, each
    member's target assignment, the metadata of the topics it subscribes to, and the
    epoch of the member that owns each partition (Kafka's partition epochs, so no
    partition has two owners).

    Only replay changes it (the ``replay_*`` methods, one per ``ConsumerGroup*`` record),
    and its state is derived: Empty without members, Assigning while the group epoch is
    ahead of the target assignment's, Stable once every member has reconciled to the
    target, Reconciling in between.
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.targets: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, SubscribedTopic] = {}
        # (topic, partition) -> epoch of the member that owns it (assigned or revoking).
        self.partition_epochs: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------------ views

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    @property
    def is_empty(self) -> bool:
        return not self.members

    def partition_epoch(self, topic: str, partition: int) -> int:
        return self.partition_epochs.get((topic, partition), -1)

    def target(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, EMPTY)

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topics(
        self, member: ConsumerMember, topic_names: Mapping[str, object]
    ) -> frozenset[str]:
        """The member's topics: its names, and the existing topics its regex matches."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = compile_regex(member.subscribed_topic_regex)
            names.update(t for t in topic_names if pattern.fullmatch(t))
        return frozenset(names)

    def is_subscribed_to(self, topic: str, topic_names: Mapping[str, object]) -> bool:
        return any(topic in self.subscribed_topics(m, topic_names) for m in self.members.values())

    # ------------------------------------------------------------------ replay

    def replay_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch

    def replay_subscription_metadata(self, topics: tuple[SubscribedTopic, ...]) -> None:
        self.subscription_metadata = {t.topic: t for t in topics}

    def replay_target_epoch(self, epoch: int) -> None:
        self.assignment_epoch = epoch

    def replay_target(self, member_id: str, partitions: tuple[TopicPartitions, ...] | None) -> None:
        if partitions is None:
            self.targets.pop(member_id, None)
        else:
            self.targets[member_id] = from_records(partitions)

    def replay_member_metadata(
        self, member_id: str, value: ConsumerGroupMemberMetadataValue | None
    ) -> None:
        if value is None:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._release(member)
                self._unlink_static(member)
            return
        member = self.members.get(member_id) or ConsumerMember(member_id)
        self._unlink_static(member)
        member = member.with_metadata(value)
        self.members[member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def replay_member_assignment(
        self, member_id: str, value: ConsumerGroupCurrentMemberAssignmentValue | None
    ) -> None:
        member = self.members.get(member_id)
        if value is None:
            if member is not None:
                self._release(member)
                self.members[member_id] = member.replace(
                    member_epoch=LEAVE_EPOCH, assigned=EMPTY, pending_revocation=EMPTY
                )
            return
        member = member or ConsumerMember(member_id)
        self._release(member)
        member = member.with_assignment(value)
        self.members[member_id] = member
        for tp in member.owned_partitions():
            self.partition_epochs[tp] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.owned_partitions():
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]

    def _unlink_static(self, member: ConsumerMember) -> None:
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]
