"""A consumer-group member speaking Kafka's classic protocol to kafkacoord.

    member = ClassicProtocolMember(bootstrap, "billing", ["orders"],
                                   assignors=["cooperative-sticky"],
                                   on_assigned=start_work, on_revoked=stop_work)

The member's thread joins, runs the assignor when it is the leader, syncs, then
heartbeats. Callbacks run on that thread. With an eager protocol every owned
partition is revoked before rejoining; with cooperative-sticky only the
partitions the new assignment takes away are revoked, followed by one more
rebalance (KIP-429).
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import structlog

from kafkacoord.coordinator.groups.assignors.common import RebalanceProtocol, TopicPartition
from kafkacoord.coordinator.groups.assignors.registry import Assignor, get_assignor
from kafkacoord.coordinator.groups.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.base import Empty
from kafkacoord.storage.clients import admin_client

from .errors import RequestError
from .group_member import GroupMember

log = structlog.get_logger(__name__)

__all__ = ["ClassicProtocolMember", "PartitionCounts", "broker_partition_counts"]

PartitionCounts = Callable[[Collection[str]], Mapping[str, int]]

_RESET_MEMBER = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION}
_FATAL = {
    ErrorCode.FENCED_INSTANCE_ID,
    ErrorCode.INVALID_SESSION_TIMEOUT,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.INVALID_GROUP_ID,
}


def broker_partition_counts(bootstrap: str) -> PartitionCounts:
    """Partition counts of Kafka topics, from the broker's metadata."""
    admin = admin_client(bootstrap, "kafkacoord-partition-counts")

    def counts(topics: Collection[str]) -> dict[str, int]:
        metadata = admin.list_topics(timeout=10)
        return {t: len(metadata.topics[t].partitions) for t in topics if t in metadata.topics}

    return counts


class ClassicProtocolMember(GroupMember):
    """A :class:`GroupMember` over JoinGroup, SyncGroup and Heartbeat; the leader runs the
    assignor over the partition counts ``partition_counts`` reads (default: the broker's)."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        *,
        assignors: Sequence[str] = ("range",),
        session_timeout_ms: int = 10_000,
        partition_counts: PartitionCounts | None = None,
        **options: Any,
    ) -> None:
        """``options``: the ones every :class:`GroupMember` takes."""
        # Checked before anything is opened: an unknown assignor leaves nothing behind.
        self._assignors: list[Assignor] = [get_assignor(name) for name in assignors]
        self._cooperative = all(
            RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in self._assignors
        )
        self._session_timeout_ms = session_timeout_ms
        self._counts = partition_counts or broker_partition_counts(bootstrap)
        self._rejoin = True
        super().__init__(bootstrap, group_id, topics, **options)

    def _leave(self, timeout_s: float) -> None:
        """LeaveGroup, for a dynamic member that joined (a static one lets its session run)."""
        if not self.member_id or self.group_instance_id is not None:
            return
        identity = g.MemberIdentity(member_id=self.member_id, reason="the consumer is closing")
        self._channel.call(self.shard, g.LeaveGroup(group_id=self.group_id, members=[identity]),
                           g.LeaveGroupResponse, timeout_s=timeout_s)  # fmt: skip

    # -- the member's thread ---------------------------------------------------------------

    def _request_rejoin(self) -> None:
        self._rejoin = True
        self._stable.clear()
        self._wake.set()

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                if self._rejoin:
                    self._join_and_sync()
                else:
                    # Up to 20% early: members that joined together (a whole group after a
                    # rebalance, a fleet after a failover) drift apart instead of
                    # heartbeating in bursts. Early never risks the session timeout.
                    self._wake.wait(self._heartbeat_s * random.uniform(0.8, 1.0))
                    self._wake.clear()
                    if not self._rejoin and not self._closing.is_set():
                        self._heartbeat()
            except RequestError as exc:
                if exc.code in _FATAL:
                    log.error("member stopped", group=self.group_id, error=str(exc))
                    self.error = exc
                    self._stable.set()
                    return
                log.info("group request failed; retrying", group=self.group_id, error=str(exc))
                self._closing.wait(0.2)

    def _heartbeat(self) -> None:
        body = g.Heartbeat(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
        )
        try:
            self._channel.call(self.shard, body, Empty, timeout_s=max(self._heartbeat_s * 3, 3))
        except RequestError as exc:
            if exc.code is ErrorCode.REBALANCE_IN_PROGRESS:
                self._request_rejoin()
            elif exc.code in _RESET_MEMBER:
                self._lose()
            else:
                raise

    def _lose(self) -> None:
        """Our membership is gone: the partitions are lost, not revoked (KIP-429)."""
        if self.assignment:
            self._callback(self._on_lost or self._on_revoked, self.assignment)
        self.assignment = frozenset()
        if self.group_instance_id is None:
            self.member_id = ""
        self.generation = -1
        self._request_rejoin()

    def _join_and_sync(self) -> None:
        self._stable.clear()
        if not self._cooperative and self.assignment:
            self._callback(self._on_revoked, self.assignment)
            self.assignment = frozenset()
        joined = self._join()
        if joined is None:
            return
        assignment = self._sync(joined)
        if assignment is None:
            return
        self.rebalances += 1
        owned = self.assignment
        revoked, added = owned - assignment, assignment - owned
        if revoked:
            self._callback(self._on_revoked, revoked)
        self.assignment = assignment
        if added or not self._cooperative:
            self._callback(self._on_assigned, added if self._cooperative else assignment)
        # Cooperative: partitions given up must be reassigned by one more rebalance.
        self._rejoin = self._cooperative and bool(revoked)
        if not self._rejoin:
            self._stable.set()
        log.info("member assigned", group=self.group_id, member=self.member_id,
                 generation=self.generation, partitions=len(assignment))  # fmt: skip

    def _join(self) -> g.JoinGroupResponse | None:
        owned = sorted(self.assignment)
        protocols = [
            g.JoinProtocol(name=a.name, metadata=encode_subscription(Subscription(
                self.topics, owned_partitions=tuple(owned), generation_id=self.generation)))
            for a in self._assignors
        ]  # fmt: skip
        body = g.JoinGroup(
            group_id=self.group_id, session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocols=protocols, client_id=self._client_id, client_host=socket.gethostname(),
        )  # fmt: skip
        wait_s = self._rebalance_timeout_ms / 1000 + 10
        try:
            return self._channel.call(self.shard, body, g.JoinGroupResponse,
                                      timeout_s=wait_s * 2, attempt_timeout_s=wait_s)  # fmt: skip
        except RequestError as exc:
            if exc.code is ErrorCode.MEMBER_ID_REQUIRED:
                given = exc.response(g.JoinGroupResponse)
                if given is not None:
                    self.member_id = given.member_id
                return None  # join again at once, with the id (KIP-394)
            if exc.code in _RESET_MEMBER:
                self._lose()
                return None
            raise

    def _sync(self, joined: g.JoinGroupResponse) -> frozenset[TopicPartition] | None:
        self.member_id = joined.member_id
        self.generation = joined.generation_id
        self.protocol = joined.protocol_name
        assignments: list[g.SyncAssignment] = []
        if joined.leader == joined.member_id and not joined.skip_assignment:
            assignments = self._assign(joined)
        body = g.SyncGroup(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocol_name=self.protocol, assignments=assignments,
        )  # fmt: skip
        try:
            synced = self._channel.call(
                self.shard, body, g.SyncGroupResponse,
                attempt_timeout_s=self._rebalance_timeout_ms / 1000 + 10,
            )  # fmt: skip
        except RequestError as exc:
            if exc.code is ErrorCode.REBALANCE_IN_PROGRESS:
                return None
            if exc.code in _RESET_MEMBER:
                self._lose()
                return None
            raise
        if not synced.assignment:
            return frozenset()
        return frozenset(decode_assignment(synced.assignment).partitions)

    def _assign(self, joined: g.JoinGroupResponse) -> list[g.SyncAssignment]:
        """As leader: run the chosen assignor over every member's subscription."""
        assignor = get_assignor(joined.protocol_name or "range")
        subscriptions: dict[str, Subscription] = {
            m.member_id: decode_subscription(m.metadata) for m in joined.members
        }
        topics = {t for s in subscriptions.values() for t in s.topics}
        counts = dict(self._counts(topics))
        result = assignor.assign(
            {m: s.topics for m, s in subscriptions.items()},
            counts,
            owned={m: s.owned_partitions for m, s in subscriptions.items()},
            generations={m: s.generation_id for m, s in subscriptions.items()},
            group_instance_ids={m.member_id: m.group_instance_id for m in joined.members},
        )
        return [
            g.SyncAssignment(member_id=m, assignment=encode_assignment(
                Assignment(tuple(result.get(m, [])))))
            for m in subscriptions
        ]  # fmt: skip
