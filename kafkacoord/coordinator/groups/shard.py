"""The group coordinator shard: one ``__kc_offsets`` partition, Kafka's classic protocol
and KIP-848 consumer groups.

:class:`GroupShard` implements the runtime's :class:`~kafkacoord.coordinator.runtime.shard.Shard`
contract: it routes requests, timers and replayed records to the managers that hold each
concern, loads, and undoes a failed request. It does no I/O and reads no clock.

- :mod:`.membership`: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup);
- :mod:`.consumer`: KIP-848 consumer groups (ConsumerGroupHeartbeat), and the classic
  members of a consumer group during an online upgrade;
- :mod:`.crossover`: which kind of group serves a group id, and the hand-over between them;
- :mod:`.offset_manager`: OffsetCommit, OffsetFetch, OffsetDelete and offset expiry
  (Kafka's ``OffsetMetadataManager``);
- :mod:`.admin`: ListGroups, DescribeGroups, DeleteGroups, ConsumerGroupDescribe;
- :mod:`.scheduling`: the timers; :mod:`.undo`: the undo log.

State, and who changes it:

- **Offsets** and **consumer groups** change only in replay.
- **Classic groups** are Kafka's soft state (see :mod:`.classic_group`): handlers change
  membership, parked requests and the in-flight generation in memory and write a
  ``GroupMetadataValue`` snapshot where Kafka does, marked ``in_memory`` so the runtime
  appends it without replaying it. The one step Kafka takes only once a snapshot is durable
  (the leader's assignment reaches the members and the group becomes Stable) is a
  post-commit action on the result, run just before the replies carrying the assignment
  are released. Group tombstones (on DeleteGroups, and when an Empty group's last offset
  expires) are applied by replay.
- Every request, timer and change of topics runs in a scope of the :class:`~.undo.UndoLog`:
  each timer deadline it moves, the classic group a membership request or timeout names
  (saved before it changes) and each consumer member's soft state record how to put
  themselves back. A handler that fails is undone from that log, newest change first.
- Before :meth:`~GroupShard.on_loaded` the shard is *loading*: ``replay`` rebuilds each group
  from its snapshot (with members it is Stable, else Empty), and an offset of an unknown
  group creates a "simple" group, as Kafka's replay does. Replay never depends on the order
  of records of different keys, so the compacted log loads in any order.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from kafkacoord.codecs.batch_size import MAX_BATCH_BYTES, MAX_RECORDS_BYTES
from kafkacoord.codecs.models import (
    GroupAdminKey,
    GroupCause,
    GroupCauseKind,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
)
from kafkacoord.coordinator.protocol import GROUP_APIS, Body, ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary import BINARY_BODIES
from kafkacoord.coordinator.protocol.binary_commit import BinaryHeartbeat, BinaryOffsetCommit
from kafkacoord.coordinator.protocol.binary_consumer import BinaryConsumerHeartbeat
from kafkacoord.coordinator.protocol.binary_fetch import BinaryOffsetFetch
from kafkacoord.coordinator.runtime.shard import (
    Record,
    Reply,
    Request,
    Result,
    encode_records,
    encoded_bytes,
)

from .admin import GroupAdmin
from .classic_group import ClassicGroup, GroupSnapshot
from .config import GroupConfig
from .consumer import CONSUMER_GROUP_KEYS, ConsumerGroup, ConsumerGroups, TopicsImage
from .consumer.classic_members import ClassicMembers
from .crossover import Crossover
from .membership import MemberIdFactory, Membership, join_error, uuid_member_id
from .offset_manager import OffsetManager
from .scheduling import EXPIRATION_TIMER, ShardTimers
from .state import GroupState
from .undo import UndoLog

__all__ = ["GroupShard"]

_REQUEST_BODIES: Final[dict[str, type[Body]]] = {n: s.request for n, s in GROUP_APIS.items()}


class GroupShard:
    """Kafka's group coordinator for the groups of one offsets partition."""

    def __init__(
        self,
        config: GroupConfig,
        partition: int,
        *,
        member_id_factory: MemberIdFactory | None = None,
    ) -> None:
        self.config = config
        self.partition = partition
        new_member_id: MemberIdFactory = member_id_factory or uuid_member_id
        self._groups: dict[str, ClassicGroup] = {}
        self._undo = UndoLog()
        self._timers = ShardTimers(self._undo)
        self._membership = Membership(config, self._groups, self._timers, new_member_id,
                                      self._undo)  # fmt: skip
        self._consumer = ConsumerGroups(config, self._timers, self._undo)
        self._classic_members = ClassicMembers(self._consumer, new_member_id)
        self._crossover = Crossover(self._groups, self._consumer, self._membership,
                                    self._classic_members)  # fmt: skip
        self._offsets = OffsetManager(config, self._groups, self._consumer, self._timers,
                                      self._undo)  # fmt: skip
        self._admin = GroupAdmin(self._groups, self._consumer, self._offsets.store)
        self._active = False

    # ================================================================= read-only views

    @property
    def active(self) -> bool:
        return self._active

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group (do not mutate it)."""
        return self._groups.get(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The live KIP-848 group (do not mutate it)."""
        return self._consumer.groups.get(group_id)

    def consumer_group_ids(self) -> list[str]:
        return sorted(self._consumer.groups)

    def describe_group(self, group_id: str) -> GroupSnapshot | None:
        group = self._groups.get(group_id)
        return None if group is None else group.snapshot()

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue]:
        return dict(self._offsets.group_offsets(group_id))

    def offsets_snapshot(self) -> dict[str, dict[tuple[str, int], OffsetCommitValue]]:
        return self._offsets.store.snapshot()

    def timer_deadline(self, key: Hashable) -> int | None:
        return self._timers.deadline(key)

    # ================================================================= replay and loading

    def replay(self, record: Record) -> None:
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            self._offsets.replay(key, value)
        elif isinstance(key, GroupMetadataKey):
            if value is not None and not isinstance(value, GroupMetadataValue):
                raise TypeError(f"group metadata key with a {type(value).__name__} value")
            self._replay_group(key.group, value)
        elif isinstance(key, CONSUMER_GROUP_KEYS):
            # A consumer group takes over the id of an empty classic group (Kafka's
            # maybeDeleteEmptyClassicGroup); whichever record comes first in a load.
            classic = self._groups.get(key.group)
            if value is not None and classic is not None and classic.is_empty:
                self._membership.cancel_group_timers(classic)
                del self._groups[key.group]
            self._consumer.replay(key, value)
        elif isinstance(key, ShardLeaderKey):
            pass  # the leader-epoch fence, applied by the readers of the log
        elif isinstance(key, GroupAdminKey):
            pass  # an admin action's audit record: history only, no state
        else:
            raise TypeError(f"{type(key).__name__} does not belong on a group shard")

    def _replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        if value is None:
            group = self._groups.pop(group_id, None)
            if group is not None:
                self._membership.cancel_group_timers(group)
                group.transition(GroupState.DEAD, None)
            return
        # Live snapshots are written ``in_memory`` (the handler holds the group), so a
        # snapshot reaches replay only while loading; it replaces a "simple" group an
        # offset of the same group may have created first.
        self._groups[group_id] = ClassicGroup.from_record(group_id, value)

    def on_loaded(self, now_ms: int) -> Result:
        self._active = True
        result = Result()
        for group in list(self._groups.values()):
            for member in group.members.values():
                self._membership.schedule_heartbeat(
                    group, member.member_id, now_ms + member.session_timeout_ms
                )
            if self.config.max_size is not None and len(group.members) > self.config.max_size:
                # The limit may have been lowered: rebalance so extra members are shed.
                cause = GroupCause(GroupCauseKind.GROUP_MAX_SIZE_EXCEEDED,
                                   detail=f"{len(group.members)} members, limit "
                                          f"{self.config.max_size}")  # fmt: skip
                result.extend(self._membership.prepare_rebalance(group, now_ms, cause))
        result.extend(self._consumer.on_loaded(now_ms))
        self._offsets.schedule_expiry(now_ms)
        return result

    def on_topics(self, topics: TopicsImage, now_ms: int) -> Result:
        """The broker's topics changed (or were first read): consumer groups whose
        subscribed topics changed get a new epoch and target assignment."""
        consumer = self._consumer
        if not self._active:
            consumer.learn_topics(topics)
            return Result()
        known, was_known = consumer.topics, consumer.topics_known
        self._undo.begin()
        try:
            result = consumer.on_topics(topics, now_ms)
            encode_records(result.records)
        except BaseException:
            self._undo.rollback()
            # Put the old topics back, so the runtime's retry sees the change again.
            consumer.topics, consumer.topics_known = known, was_known
            raise
        self._undo.commit()
        return result

    def on_unloaded(self) -> list[Reply]:
        self._consumer.unload()
        replies = self._membership.unload()
        self._groups.clear()
        self._offsets.clear()
        self._timers.clear()
        self._active = False
        return replies

    # ================================================================= timers

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline()

    def fire_timers(self, now_ms: int) -> Result:
        # Each key fires in an undo scope of its own (ShardTimers.fire).
        return self._timers.fire(now_ms, lambda key: self._fire(key, now_ms))

    def _fire(self, key: Hashable, now: int) -> Result:
        if key == EXPIRATION_TIMER:
            return self._offsets.expire(now)
        if not isinstance(key, tuple):
            return Result()
        if ConsumerGroups.owns_timer(key):
            return self._consumer.fire(key, now)
        if key[0] == "heartbeat":
            return self._membership.expire_heartbeat(key[1], key[2], now)
        if key[0] == "join":
            return self._membership.expire_join(key[1], now)
        if key[0] == "sync":
            return self._membership.expire_sync(key[1], now)
        return Result()

    # ================================================================= requests

    def handle(self, request: Request, now_ms: int) -> Result:
        if not self._active:
            return _refused(
                request,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"offsets partition {self.partition} is loading",
            )
        expected = _REQUEST_BODIES.get(request.api)
        body_type = type(request.body)
        if expected is None or (
            body_type is not expected and BINARY_BODIES.get(request.api) is not body_type
        ):
            return _refused(
                request,
                ErrorCode.INVALID_REQUEST,
                f"{request.api!r} with a {type(request.body).__name__} body is not a "
                "group coordinator request",
            )
        undo = self._undo
        undo.begin()
        try:
            result = self._dispatch(request, now_ms)
            encode_records(result.records)  # a value no record can hold fails here, alone
            if result.records:
                _check_fits_one_batch(request.api, result.records)
        except ProtocolError as exc:
            undo.rollback()
            return Result(replies=[_error_reply(request, exc.code, exc.message)])
        except BaseException:
            undo.rollback()
            raise  # the runtime answers UNKNOWN_SERVER_ERROR; this shard serves on
        undo.commit()
        return result

    def _dispatch(self, request: Request, now: int) -> Result:
        body, ref = request.body, request.ref
        # Exact types (handle checked them): pydantic's isinstance runs Python code, and a
        # chain of them cost a commit several microseconds.
        if type(body) is BinaryOffsetCommit or type(body) is api.OffsetCommit:  # most traffic
            return self._offsets.commit(ref, body, now)
        # A classic member of a consumer group (an online upgrade), or of a classic group.
        if type(body) is api.Heartbeat or type(body) is BinaryHeartbeat:  # the rest
            consumer = self._consumer.groups.get(body.group_id)
            if consumer is not None:
                return self._classic_members.heartbeat(ref, body, consumer, now)
            return self._membership.heartbeat(ref, body, now)
        if type(body) is api.ConsumerGroupHeartbeat or type(body) is BinaryConsumerHeartbeat:
            return self._crossover.consumer_heartbeat(ref, body, now)
        if type(body) is api.JoinGroup:
            return self._crossover.join_group(ref, body, now)
        if type(body) is api.SyncGroup:
            consumer = self._consumer.groups.get(body.group_id)
            if consumer is not None:
                return self._classic_members.sync(ref, body, consumer, now)
            return self._membership.sync_group(ref, body, now)
        if type(body) is api.LeaveGroup:
            consumer = self._consumer.groups.get(body.group_id)
            if consumer is not None:
                return self._classic_members.leave(ref, body, consumer)
            return self._membership.leave_group(ref, body, now)
        if type(body) is api.OffsetFetch or type(body) is BinaryOffsetFetch:
            return self._offsets.fetch(ref, body)
        if type(body) is api.OffsetDelete:
            return self._offsets.delete(ref, body, now)
        if type(body) is api.ListGroups:
            return self._admin.list_groups(ref, body)
        if type(body) is api.DescribeGroups:
            return self._admin.describe_groups(ref, body)
        if type(body) is api.DeleteGroups:
            return self._admin.delete_groups(ref, body, now)
        if type(body) is api.ConsumerGroupDescribe:
            return self._admin.describe_consumer_groups(ref, body)
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"unhandled api {request.api!r}")


def _refused(request: Request, code: ErrorCode, message: str) -> Result:
    return Result(replies=[Reply(request.ref, request.api, code, None, message)])


def _check_fits_one_batch(api_name: str, records: list[Record]) -> None:
    """ProtocolError if ``records`` (encoded) cannot fit one batch the broker takes: for
    OffsetCommit INVALID_COMMIT_OFFSET_SIZE, as Kafka answers a commit whose append is too
    large; for any other request UNKNOWN_SERVER_ERROR, as Kafka's coordinator does."""
    size = encoded_bytes(records)
    if size <= MAX_RECORDS_BYTES:
        return
    message = (
        f"{api_name} would write {len(records)} records of up to {size} bytes, more than one "
        f"batch of {MAX_BATCH_BYTES} bytes holds"
    )
    if api_name == "OffsetCommit":
        raise ProtocolError(
            ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
            f"{message}; send fewer partitions in each request",
        )
    raise ProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def _error_reply(request: Request, code: ErrorCode, message: str | None) -> Reply:
    body = request.body
    if isinstance(body, api.JoinGroup):
        return join_error(request.ref, body.member_id, code, message)
    return Reply(request.ref, request.api, code, None, message)
