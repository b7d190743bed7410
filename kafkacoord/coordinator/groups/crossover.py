"""Where the classic protocol and KIP-848 consumer groups meet on one group id.

A group id names either a classic group or a consumer group. :class:`Crossover` picks
which one serves a request, as Kafka's ``GroupMetadataManager`` does:

- an empty group of either kind gives its id to the first member of the other protocol
  (its tombstone goes first in the same result);
- a consumer-protocol member joining a Stable classic ``consumer`` group with members
  turns it into a consumer group (the online upgrade, :mod:`.consumer.migration`);
- a JoinGroup to a consumer group with members is a classic member's
  (:mod:`.consumer.classic_members`), as are the SyncGroup, Heartbeat and LeaveGroup the
  shard routes there itself.
"""

from __future__ import annotations

from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_consumer import ConsumerHeartbeatRequest
from kafkacoord.coordinator.runtime.shard import RequestRef, Result

from .classic_group import ClassicGroup
from .consumer import ConsumerGroups
from .consumer.classic_members import ClassicMembers
from .consumer.migration import convert_classic_group
from .consumer.records import group_tombstones as consumer_group_tombstones
from .consumer_protocol import PROTOCOL_TYPE
from .membership import Membership
from .records import group_metadata_tombstone
from .state import GroupState

__all__ = ["Crossover"]


class Crossover:
    """Routes the requests that may reach either kind of group."""

    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        consumer: ConsumerGroups,
        membership: Membership,
        classic_members: ClassicMembers,
    ) -> None:
        self._groups = groups  # the shard's classic groups, read only here
        self._consumer = consumer
        self._membership = membership
        self._classic_members = classic_members

    def consumer_heartbeat(
        self, ref: RequestRef, body: ConsumerHeartbeatRequest, now: int
    ) -> Result:
        classic = self._groups.get(body.group_id)
        if classic is None or body.member_epoch != 0:
            return self._consumer.heartbeat(ref, body, now)
        if not classic.is_empty or classic.pending_members:
            return self._upgrade(ref, body, classic, now)
        # An empty classic group gives its id (and offsets) to the consumer group.
        result = self._consumer.heartbeat(ref, body, now)
        if classic.persisted is not None:
            result.records.insert(0, group_metadata_tombstone(body.group_id))
        return result

    def _upgrade(
        self, ref: RequestRef, body: ConsumerHeartbeatRequest, classic: ClassicGroup, now: int
    ) -> Result:
        """The first consumer-protocol member of a classic group with members: the group
        becomes a consumer group, its classic members still speaking the classic protocol
        (an online upgrade, as Kafka 4's rolling upgrade)."""
        if classic.protocol_type != PROTOCOL_TYPE:
            raise ProtocolError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"group {body.group_id!r} is a classic group of protocol type "
                f"{classic.protocol_type!r}; only consumer groups can be upgraded",
            )
        if classic.state is not GroupState.STABLE or classic.pending_members:
            # Retriable: a rebalance of the classic group is under way.
            raise ProtocolError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"classic group {body.group_id!r} is {classic.state}; it becomes a consumer "
                "group once Stable",
            )
        if not self._consumer.topics_known:
            raise ProtocolError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                "the broker's topics are not known yet; the upgrade waits for them",
            )
        converted = convert_classic_group(classic, self._consumer.topics)
        return self._consumer.heartbeat(ref, body, now, converted=converted)

    def join_group(self, ref: RequestRef, body: api.JoinGroup, now: int) -> Result:
        consumer = self._consumer.groups.get(body.group_id)
        if consumer is None:
            return self._membership.join_group(ref, body, now)
        if not consumer.is_empty:
            # A classic member of a consumer group: a rolling upgrade is under way.
            return self._classic_members.join(ref, body, consumer, now)
        # An empty consumer group gives its id to the classic group, once one is created.
        result = self._membership.join_group(ref, body, now)
        if body.group_id in self._groups:
            result.records[:0] = consumer_group_tombstones(body.group_id)
        return result
