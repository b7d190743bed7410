"""A group member speaking Kafka 4's consumer protocol (KIP-848) to kafkacoord.

    member = ConsumerProtocolMember(bootstrap, "billing", ["orders"],
                                    on_assigned=start_work, on_revoked=stop_work)

The coordinator computes the assignment. The member only heartbeats: each response
may carry its new assignment. It revokes what is gone (``on_revoked``), takes what is new
(``on_assigned``), and heartbeats again at once to say so. A rebalance therefore never
stops the members whose partitions stay where they are. The member id is generated here
(KIP-1082) and kept across rejoins.
"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from kafkacoord.coordinator.groups.assignors.common import TopicPartition
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g

from .errors import RequestError
from .group_member import GroupMember

log = structlog.get_logger(__name__)

__all__ = ["ConsumerProtocolMember"]

# The coordinator no longer knows this member at its epoch: partitions are lost, rejoin.
_FENCED = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}
_FATAL = {
    ErrorCode.UNRELEASED_INSTANCE_ID,
    ErrorCode.FENCED_INSTANCE_ID,
    ErrorCode.UNSUPPORTED_ASSIGNOR,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.INVALID_REGULAR_EXPRESSION,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.INVALID_GROUP_ID,
    ErrorCode.GROUP_ID_NOT_FOUND,
}
# While reconciling, the next heartbeat goes out this soon (it acknowledges a revocation).
_ACK_DELAY_S = 0.02


class ConsumerProtocolMember(GroupMember):
    """A :class:`GroupMember` over ConsumerGroupHeartbeat; the coordinator assigns."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        *,
        server_assignor: str | None = None,
        topic_regex: str | None = None,
        rack_id: str | None = None,
        hints: bool = True,
        **options: Any,
    ) -> None:
        """``options``: the ones every :class:`GroupMember` takes."""
        super().__init__(bootstrap, group_id, topics, **options)
        self.member_id = str(uuid.uuid4())
        self.generation = 0  # the member epoch
        self.protocol = "consumer"
        self._server_assignor = server_assignor
        self._topic_regex = topic_regex
        self._rack_id = rack_id
        self._full = True  # the next heartbeat carries every field
        self._next_s = 0.0
        self.hints = 0  # hints the daemon pushed (they make it heartbeat at once)
        if hints:
            self._channel.client.watch_hints(group_id, self.member_id, self._hinted)

    def _hinted(self) -> None:
        self.hints += 1
        self._next_s = 0.0
        self._wake.set()

    # -- the member's thread ---------------------------------------------------------------

    def _request_rejoin(self) -> None:
        # A commit saw a stale epoch or an unknown member: heartbeat now to learn the news.
        self._full = True
        self._stable.clear()
        self._wake.set()

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._heartbeat()
            except RequestError as exc:
                if exc.code in _FATAL:
                    log.error("member stopped", group=self.group_id, error=str(exc))
                    self.error = exc
                    self._stable.set()
                    return
                log.info("heartbeat failed; retrying", group=self.group_id, error=str(exc))
                self._full = True
                self._next_s = 0.2
            self._wake.wait(self._next_s)
            self._wake.clear()

    def _heartbeat(self) -> None:
        full = self._full or self.generation == 0
        owned: dict[str, list[int]] = {}
        for topic, partition in sorted(self.assignment):
            owned.setdefault(topic, []).append(partition)
        body = g.ConsumerGroupHeartbeat(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.generation,
            instance_id=self.group_instance_id,
            rack_id=self._rack_id if full else None,
            rebalance_timeout_ms=self._rebalance_timeout_ms if full else -1,
            subscribed_topic_names=list(self.topics) if full else None,
            subscribed_topic_regex=self._topic_regex if full else None,
            server_assignor=self._server_assignor if full else None,
            topic_partitions=[
                g.HeartbeatTopicPartitions(topic=t, partitions=ps) for t, ps in owned.items()
            ],
            client_id=self._client_id,
            client_host=socket.gethostname(),
        )
        try:
            reply = self._channel.call(self.shard, body, g.ConsumerGroupHeartbeatResponse)
        except RequestError as exc:
            if exc.code in _FENCED:
                self._fenced(exc)
                return
            raise
        self._full = False
        interval_s = reply.heartbeat_interval_ms / 1000 or self._heartbeat_s
        # Up to 20% early: members that joined together drift apart.
        self._next_s = interval_s * random.uniform(0.8, 1.0)
        if reply.member_epoch != self.generation:
            self.generation = reply.member_epoch
        if reply.assignment is None:
            self._stable.set()
            return
        target = frozenset((a.topic, p) for a in reply.assignment for p in a.partitions)
        revoked, added = self.assignment - target, target - self.assignment
        if revoked:
            self._callback(self._on_revoked, revoked)
        self.assignment = target
        if added:
            self._callback(self._on_assigned, added)
        if revoked or added:
            self.rebalances += 1
            self._stable.clear()
            self._next_s = _ACK_DELAY_S  # say so at once: the coordinator moves on
            log.info("member assignment changed", group=self.group_id, member=self.member_id,
                     epoch=self.generation, partitions=len(target))  # fmt: skip
        else:
            self._stable.set()

    def _fenced(self, exc: RequestError) -> None:
        log.info("member fenced; rejoining", group=self.group_id, error=str(exc))
        if self.assignment:
            self._callback(self._on_lost or self._on_revoked, self.assignment)
        self.assignment = frozenset()
        self.generation = 0
        self._full = True
        self._stable.clear()
        self._next_s = 0.0

    # -- public API ----------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int | tuple[int, str]]) -> None:
        """Commit at the current member epoch; durable when this returns. A stale epoch
        (STALE_MEMBER_EPOCH) raises and makes the member heartbeat at once, so a retry
        goes out with the new epoch."""
        try:
            super().commit(offsets)
        except RequestError as exc:
            if exc.code in (ErrorCode.STALE_MEMBER_EPOCH, *_FENCED):
                self._request_rejoin()
            raise

    def close(self, leave: bool = True, timeout_s: float = 8.0) -> None:
        """Stop within ``timeout_s``; leave the group (a static member: for a while)."""
        self._channel.client.unwatch_hints(self.group_id, self.member_id)
        super().close(leave, timeout_s)

    def _leave(self, timeout_s: float) -> None:
        if self.generation <= 0:
            return  # never joined, or fenced: there is nothing to leave
        epoch = -2 if self.group_instance_id is not None else -1
        body = g.ConsumerGroupHeartbeat(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id, client_id=self._client_id,
        )  # fmt: skip
        self._channel.call(self.shard, body, g.ConsumerGroupHeartbeatResponse, timeout_s=timeout_s)
