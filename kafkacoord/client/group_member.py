"""What every consumer-group member shares, whichever protocol it speaks.

    member = group_member(bootstrap, "billing", ["orders"], assignors=["cooperative-sticky"],
                          on_assigned=start_work, on_revoked=stop_work)
    member.start().wait_assigned(60)
    member.commit({("orders", 3): 1200})
    member.close()                      # leaves the group (dynamic members)

:func:`~kafkacoord.client.members.group_member` builds one for a protocol: a
:class:`~kafkacoord.client.classic_member.ClassicProtocolMember` (Kafka's classic
protocol, the default) or a :class:`~kafkacoord.client.consumer_member.ConsumerProtocolMember`
(Kafka 4's consumer protocol, KIP-848). Either runs on a thread of its own and calls back
on it; commits, offset reads and closing are the same for both.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import structlog

from kafkacoord.coordinator.groups.assignors.common import TopicPartition
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.wire import ClientTls

from .base import GroupChannel
from .errors import RequestError

log = structlog.get_logger(__name__)

__all__ = ["Callback", "CommitFailedError", "GroupMember"]

Callback = Callable[[frozenset[TopicPartition]], None]

# A commit that fails with one of these means the membership moved on: rejoin.
_REJOIN_ON_COMMIT = {
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS,
}


class CommitFailedError(Exception):
    def __init__(self, errors: Mapping[TopicPartition, ErrorCode]) -> None:
        detail = ", ".join(f"{t}-{p}: {e.name}" for (t, p), e in sorted(errors.items()))
        super().__init__(f"commit failed: {detail}")
        self.errors = dict(errors)


class GroupMember(ABC):
    """One member of a consumer group, with its own thread (see the module docstring).

    A protocol fills in the member's thread (:meth:`_run`), what a commit that finds the
    membership moved on does (:meth:`_request_rejoin`) and how it leaves (:meth:`_leave`).
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        *,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        on_lost: Callback | None = None,
        group_instance_id: str | None = None,
        rebalance_timeout_ms: int = 60_000,
        heartbeat_interval_ms: int = 1_000,
        client_id: str = "kafkacoord-member",
        topic_prefix: str = "__kc_",
        offsets_partitions: int = 50,
        tls: ClientTls | None = None,
    ) -> None:
        self.group_id = group_id
        self.topics = tuple(topics)
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.rebalances = 0
        self.error: RequestError | None = None
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._client_id = client_id
        self._channel = GroupChannel(
            bootstrap, topic_prefix=topic_prefix, offsets_partitions=offsets_partitions,
            tls=tls,
        )  # fmt: skip
        self.shard = self._channel.shard_of(group_id)
        self._stable = threading.Event()
        self._closing = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{group_id}", daemon=True)

    # -- public API ----------------------------------------------------------------------

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def wait_assigned(self, timeout_s: float) -> bool:
        """Wait until the member holds a stable assignment (possibly empty)."""
        return self._stable.wait(timeout_s)

    def commit(self, offsets: Mapping[TopicPartition, int | tuple[int, str]]) -> None:
        """Commit within the current generation; durable when this returns."""
        topics: dict[str, list[g.CommitPartition]] = {}
        for (topic, partition), value in sorted(offsets.items()):
            offset, metadata = value if isinstance(value, tuple) else (value, "")
            topics.setdefault(topic, []).append(
                g.CommitPartition(partition=partition, offset=offset, metadata=metadata)
            )
        body = g.OffsetCommit(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            topics=[g.CommitTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )  # fmt: skip
        reply = self._channel.call(self.shard, body, g.OffsetCommitResponse)
        errors = {(t.name, p.partition): p.error for t in reply.topics for p in t.partitions
                  if p.error is not ErrorCode.NONE}  # fmt: skip
        if errors:
            if any(e in _REJOIN_ON_COMMIT for e in errors.values()):
                self._request_rejoin()
            raise CommitFailedError(errors)

    def committed(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of the group (all of them, or the ones asked for)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [g.FetchTopic(name=t, partitions=ps) for t, ps in sorted(by_topic.items())]
        body = g.OffsetFetch(group_id=self.group_id, topics=topics)
        reply = self._channel.call(self.shard, body, g.OffsetFetchResponse)
        return {(t.name, p.partition): p.offset for t in reply.topics for p in t.partitions
                if p.offset >= 0}  # fmt: skip

    def close(self, leave: bool = True, timeout_s: float = 8.0) -> None:
        """Stop within ``timeout_s``; a dynamic member leaves the group so it rebalances at
        once. A member whose coordinator does not answer skips the leave: its session
        expires instead."""
        deadline = time.monotonic() + timeout_s
        self._closing.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s / 2)
        # Still in a call (a join waits up to the rebalance timeout): nobody answers.
        stuck = self._thread.is_alive()
        if self.assignment and self._on_revoked is not None:
            self._callback(self._on_revoked, self.assignment)
        if leave and not stuck:
            try:
                self._leave(max(deadline - time.monotonic(), 0.5))
            except RequestError as exc:
                log.info("leave group failed", group=self.group_id, error=str(exc))
        self._channel.close()

    # -- what each protocol does -------------------------------------------------------------

    @abstractmethod
    def _run(self) -> None:
        """The member's thread: join, then keep the membership until closing."""

    @abstractmethod
    def _request_rejoin(self) -> None:
        """A commit found the membership moved on: bring it up to date soon."""

    @abstractmethod
    def _leave(self, timeout_s: float) -> None:
        """Leave the group as the member closes (within ``timeout_s``)."""

    # -- shared by both --------------------------------------------------------------------

    def _callback(self, fn: Callback | None, partitions: frozenset[TopicPartition]) -> None:
        if fn is None or not partitions:
            return
        try:
            fn(partitions)
        except Exception:
            log.exception("member callback failed", group=self.group_id)

    def __enter__(self) -> GroupMember:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
