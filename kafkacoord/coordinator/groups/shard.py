"""The group coordinator shard: one ``__kc_offsets`` partition, Kafka's classic protocol.

:class:`GroupShard` implements the runtime's :class:`~kafkacoord.coordinator.runtime.shard.Shard`
contract with the semantics of Kafka's ``GroupMetadataManager`` / ``OffsetMetadataManager``
for classic groups: the membership protocol lives in :mod:`.membership`, the timers in
:mod:`.scheduling`; this module adds replay, loading, offsets and the admin APIs. It does
no I/O and reads no clock.

State, and who changes it:

- **Offsets** change only in :meth:`GroupShard.replay`.
- **Groups** are Kafka's soft state (see :mod:`.classic_group`): handlers change membership, parked
  requests and the in-flight generation in memory and write a ``GroupMetadataValue`` snapshot
  where Kafka does, marked ``in_memory`` so the runtime appends it without replaying it. The
  one step Kafka takes only once a snapshot is durable (the leader's assignment reaches the
  members and the group becomes Stable) is a post-commit action on the result, run just
  before the replies carrying the assignment are released. Group tombstones (on
  DeleteGroups, and when an Empty group's last offset expires) are applied by replay.
- Before :meth:`~GroupShard.on_loaded` the shard is *loading*: ``replay`` rebuilds each group
  from its snapshot (with members it is Stable, else Empty), and an offset of an unknown
  group creates a "simple" group, as Kafka's replay does. Replay never depends on the order
  of records of different keys, so the compacted log loads in any order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, cast, get_args

from kafkacoord.codecs.models import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
)
from kafkacoord.coordinator.protocol import GROUP_APIS, Body, ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import (
    Record,
    Reply,
    Request,
    RequestRef,
    Result,
    encode_records,
)

from .classic_group import ClassicGroup, GroupSnapshot
from .commit_replies import CommitReplies, Outcomes
from .config import GroupConfig
from .consumer import CONSUMER_GROUP_KEYS, ConsumerGroup, ConsumerGroups, TopicsImage
from .consumer.classic_members import ClassicMembers
from .consumer.coordinator import ConsumerSoftState
from .consumer.migration import convert_classic_group
from .consumer.records import group_tombstones as consumer_group_tombstones
from .consumer_protocol import PROTOCOL_TYPE
from .membership import MemberIdFactory, Membership, join_error, uuid_member_id
from .offsets import (
    ExpirationPolicy,
    OffsetStore,
    expiration_policy,
    expired_partitions,
    java_string_length,
)
from .records import (
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
    offset_commit_value,
)
from .scheduling import EXPIRATION_TIMER, ShardTimers
from .state import GroupState

__all__ = ["GroupShard"]

_REQUEST_BODIES: Final[dict[str, type[Body]]] = {n: s.request for n, s in GROUP_APIS.items()}


_MembershipBody = api.JoinGroup | api.SyncGroup | api.LeaveGroup
_MemberBody = _MembershipBody | api.Heartbeat
_MEMBERSHIP_BODIES: Final = frozenset(get_args(_MembershipBody))
_MEMBER_BODIES: Final = frozenset(get_args(_MemberBody))  # bodies naming a member
_INT64_MAX: Final = 2**63 - 1
# Timer kinds whose key names a classic group, as ("heartbeat", group, member).
_GROUP_TIMERS: Final = frozenset({"heartbeat", "join", "sync"})


@dataclass(frozen=True, slots=True)
class _Saved:
    group_id: str | None  # None: no group to put back, only the timers
    group: ClassicGroup | None
    timers: dict[Hashable, int]
    consumer: ConsumerSoftState | None = None


class GroupShard:
    """Kafka's classic group coordinator for the groups of one offsets partition."""

    def __init__(
        self,
        config: GroupConfig,
        partition: int,
        *,
        member_id_factory: MemberIdFactory | None = None,
    ) -> None:
        self.config = config
        self.partition = partition
        self._new_member_id: MemberIdFactory = member_id_factory or uuid_member_id
        self._groups: dict[str, ClassicGroup] = {}
        self._offsets = OffsetStore()
        self._timers = ShardTimers()
        self._membership = Membership(config, self._groups, self._timers, self._new_member_id)
        self._commit_replies = CommitReplies()
        self._consumer = ConsumerGroups(config, self._timers)
        self._classic_members = ClassicMembers(self._consumer, self._new_member_id)
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
        return self._offsets.snapshot()

    def timer_deadline(self, key: Hashable) -> int | None:
        return self._timers.deadline(key)

    # ================================================================= Shard contract

    def replay(self, record: Record) -> None:
        key, value = record.key, record.value
        if isinstance(key, GroupMetadataKey):
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
        elif isinstance(key, OffsetCommitKey):
            if value is not None and not isinstance(value, OffsetCommitValue):
                raise TypeError(f"offset commit key with a {type(value).__name__} value")
            if (
                value is not None
                and key.group not in self._groups
                and key.group not in self._consumer.groups
            ):
                # Kafka's "simple" group: offsets committed without group membership.
                self._groups[key.group] = ClassicGroup(key.group)
            self._offsets.replay(key, value)
        elif isinstance(key, ShardLeaderKey):
            pass  # the leader-epoch fence, applied by the readers of the log
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
                result.extend(self._membership.prepare_rebalance(group, now_ms))
        result.extend(self._consumer.on_loaded(now_ms))
        self._timers.schedule(
            EXPIRATION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms
        )
        return result

    def on_topics(self, topics: TopicsImage, now_ms: int) -> Result:
        """The broker's topics changed (or were first read): consumer groups whose
        subscribed topics changed get a new epoch and target assignment."""
        if not self._active:
            self._consumer.learn_topics(topics)
            return Result()
        consumer = self._consumer
        known, was_known = consumer.topics, consumer.topics_known
        timers = self._timers.snapshot()
        try:
            result = consumer.on_topics(topics, now_ms)
            encode_records(result.records)
            return result
        except Exception:
            # Put the old topics back, so the runtime's retry sees the change again.
            consumer.topics, consumer.topics_known = known, was_known
            self._timers.restore(timers)
            raise

    def on_unloaded(self) -> list[Reply]:
        self._consumer.unload()
        replies = self._membership.unload()
        self._groups.clear()
        self._offsets.clear()
        self._timers.clear()
        self._active = False
        return replies

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline()

    def fire_timers(self, now_ms: int) -> Result:
        return self._timers.fire(
            now_ms, lambda key: self._fire(key, now_ms), self._save_for_timer, self._restore
        )

    def _save_for_timer(self, key: Hashable) -> _Saved:
        """A classic group's timer changes that group before its records are durable; a
        consumer group's, the members' rebalance epochs and last requests."""
        if ConsumerGroups.owns_timer(key):
            return _Saved(None, None, self._timers.snapshot(), self._consumer.soft_state())
        group_id = key[1] if isinstance(key, tuple) and key[0] in _GROUP_TIMERS else None
        group = None if group_id is None else self._groups.get(group_id)
        return _Saved(group_id, copy.deepcopy(group), self._timers.snapshot())

    def handle(self, request: Request, now_ms: int) -> Result:
        if not self._active:
            return Result(
                replies=[
                    Reply(
                        request.ref,
                        request.api,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        None,
                        f"offsets partition {self.partition} is loading",
                    )
                ]
            )
        expected = _REQUEST_BODIES.get(request.api)
        if expected is None or type(request.body) is not expected:
            return Result(
                replies=[
                    Reply(
                        request.ref,
                        request.api,
                        ErrorCode.INVALID_REQUEST,
                        None,
                        f"{request.api!r} with a {type(request.body).__name__} body is not a "
                        "group coordinator request",
                    )
                ]
            )
        saved = self._save(request.body)
        try:
            result = self._dispatch(request, now_ms)
            encode_records(result.records)  # a value no record can hold fails here, alone
            return result
        except ProtocolError as exc:
            self._restore(saved)
            return Result(replies=[self._error_reply(request, exc.code, exc.message)])
        except Exception:
            self._restore(saved)
            raise  # the runtime answers UNKNOWN_SERVER_ERROR; this shard serves on

    def _save(self, body: object) -> _Saved | None:
        """Membership handlers change a group and its timers before any record is durable:
        keep a copy to put back if one fails. Heartbeats, commits and fetches change at most
        a deadline and are not copied (they are most of the traffic)."""
        if type(body) not in _MEMBERSHIP_BODIES:
            return None
        group_id = cast(_MembershipBody, body).group_id
        group = self._groups.get(group_id)
        return _Saved(group_id, copy.deepcopy(group), self._timers.snapshot())

    def _restore(self, saved: _Saved | None) -> None:
        if saved is None:
            return
        if saved.consumer is not None:
            self._consumer.restore_soft_state(saved.consumer)
        if saved.group_id is None:
            pass
        elif saved.group is None:
            self._groups.pop(saved.group_id, None)
        else:
            self._groups[saved.group_id] = saved.group
        self._timers.restore(saved.timers)

    def _dispatch(self, request: Request, now: int) -> Result:
        body = request.body
        # Exact types (handle checked them): pydantic's isinstance runs Python code, and a
        # chain of them cost a commit several microseconds.
        if type(body) is api.OffsetCommit:  # most of the traffic
            return self._offset_commit(request.ref, body, now)
        if type(body) is api.ConsumerGroupHeartbeat:
            return self._consumer_heartbeat(request.ref, body, now)
        if type(body) is api.ConsumerGroupDescribe:
            described = [self._consumer.describe(g) for g in body.group_ids]
            response = api.ConsumerGroupDescribeResponse(groups=described)
            return Result(replies=[Reply(request.ref, "ConsumerGroupDescribe", body=response)])
        if type(body) is api.JoinGroup:
            return self._join_group(request.ref, body, now)
        consumer = (
            self._consumer.groups.get(cast(_MemberBody, body).group_id)
            if type(body) in _MEMBER_BODIES
            else None
        )
        if type(body) is api.SyncGroup:
            if consumer is not None:
                return self._classic_members.sync(request.ref, body, consumer, now)
            return self._membership.sync_group(request.ref, body, now)
        if type(body) is api.Heartbeat:
            if consumer is not None:
                return self._classic_members.heartbeat(request.ref, body, consumer, now)
            return self._membership.heartbeat(request.ref, body, now)
        if type(body) is api.LeaveGroup:
            if consumer is not None:
                return self._classic_members.leave(request.ref, body, consumer)
            return self._membership.leave_group(request.ref, body, now)
        if type(body) is api.OffsetFetch:
            return self._offset_fetch(request.ref, body)
        if type(body) is api.OffsetDelete:
            return self._offset_delete(request.ref, body)
        if type(body) is api.ListGroups:
            return self._list_groups(request.ref, body)
        if type(body) is api.DescribeGroups:
            return self._describe_groups(request.ref, body)
        if type(body) is api.DeleteGroups:
            return self._delete_groups(request.ref, body)
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"unhandled api {request.api!r}")

    # ================================================================= replies

    def _error_reply(self, request: Request, code: ErrorCode, message: str | None) -> Reply:
        body = request.body
        if isinstance(body, api.JoinGroup):
            return join_error(request.ref, body.member_id, code, message)
        return Reply(request.ref, request.api, code, None, message)

    # ================================================================= protocols

    def _consumer_heartbeat(
        self, ref: RequestRef, body: api.ConsumerGroupHeartbeat, now: int
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
        self, ref: RequestRef, body: api.ConsumerGroupHeartbeat, classic: ClassicGroup, now: int
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

    def _join_group(self, ref: RequestRef, body: api.JoinGroup, now: int) -> Result:
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

    # ================================================================= timers

    def _fire(self, key: Hashable, now: int) -> Result:
        if key == EXPIRATION_TIMER:
            return self._expire_offsets(now)
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

    def _expire_offsets(self, now: int) -> Result:
        records: list[Record] = []
        retention = self.config.offsets_retention_ms
        for group_id in sorted(set(self._consumer.groups)):
            records.extend(self._expire_consumer_group(group_id, now))
        for group_id in sorted(set(self._groups) | set(self._offsets.group_ids())):
            if group_id in self._consumer.groups:
                continue
            group = self._groups.get(group_id)
            offsets = self._offsets.group_offsets(group_id)
            expired = expired_partitions(offsets, now, retention, expiration_policy(group))
            records.extend(
                offset_commit_tombstone(group_id, topic, partition) for topic, partition in expired
            )
            if (
                group is None
                or len(expired) != len(offsets)
                or not group.is_empty
                or group.pending_members
            ):
                continue
            if offsets or group.persisted is not None:
                records.append(group_metadata_tombstone(group_id))
            else:
                # Never durable (e.g. a join that never completed): just forget it.
                del self._groups[group_id]
        self._timers.schedule(
            EXPIRATION_TIMER, now + self.config.offsets_retention_check_interval_ms
        )
        return Result(records=records)

    def _expire_consumer_group(self, group_id: str, now: int) -> list[Record]:
        """Kafka's rule for consumer groups: offsets of topics the group subscribes to are
        kept; the others expire from their commit. An empty group whose offsets are all gone
        goes too."""
        group = self._consumer.groups[group_id]
        offsets = self._offsets.group_offsets(group_id)
        subscribed = {t for t, _ in offsets if group.is_subscribed_to(t, self._consumer.topics)}
        candidates = {tp: v for tp, v in offsets.items() if tp[0] not in subscribed}
        expired = expired_partitions(
            candidates, now, self.config.offsets_retention_ms, ExpirationPolicy()
        )
        records = [offset_commit_tombstone(group_id, t, p) for t, p in expired]
        if group.is_empty and len(expired) == len(offsets):
            records.extend(consumer_group_tombstones(group_id))
        return records

    # ================================================================= offsets

    def _offset_commit(self, ref: RequestRef, body: api.OffsetCommit, now: int) -> Result:
        group = self._groups.get(body.group_id)
        consumer = self._consumer.groups.get(body.group_id)
        try:
            if not body.group_id:
                raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
            if now + body.retention_time_ms > _INT64_MAX:  # the edge bounds it; in case not
                raise ProtocolError(
                    ErrorCode.INVALID_REQUEST,
                    f"retention_time_ms {body.retention_time_ms} puts the expiry past int64",
                )
            if consumer is not None:
                self._consumer.validate_offset_commit(consumer, body.member_id, body.generation_id)
            elif group is None:
                if body.generation_id >= 0:
                    # Members of a generation this coordinator does not know: rejoin.
                    raise ProtocolError(
                        ErrorCode.ILLEGAL_GENERATION,
                        f"group {body.group_id!r} does not exist, so generation "
                        f"{body.generation_id} is not current",
                    )
            else:
                group.validate_offset_commit(
                    body.member_id, body.group_instance_id, body.generation_id
                )
        except ProtocolError as exc:
            # Kafka reports a group-level failure on every partition.
            topics = [
                api.TopicErrors(
                    name=t.name,
                    partitions=[
                        api.PartitionError(partition=p.partition, error=exc.code)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
            return Result(
                replies=[
                    Reply(
                        ref,
                        "OffsetCommit",
                        exc.code,
                        api.OffsetCommitResponse(topics=topics),
                        exc.message,
                    )
                ]
            )

        limit = self.config.offset_metadata_max_bytes
        records: list[Record] = []
        outcomes: Outcomes = []
        for t in body.topics:
            partitions: list[tuple[int, ErrorCode]] = []
            for p in t.partitions:
                if p.metadata is not None and java_string_length(p.metadata) > limit:
                    partitions.append((p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                records.append(
                    offset_commit_record(
                        body.group_id,
                        t.name,
                        p.partition,
                        offset_commit_value(
                            p.offset, p.leader_epoch, p.metadata, now, body.retention_time_ms
                        ),
                    )
                )
                partitions.append((p.partition, ErrorCode.NONE))
            outcomes.append((t.name, partitions))
        return Result(records, [self._commit_replies.reply(ref, outcomes)])

    @staticmethod
    def _fetched(partition: int, value: OffsetCommitValue | None) -> api.FetchedPartition:
        if value is None:
            return api.FetchedPartition(partition=partition, offset=-1, metadata="")
        expire = value.expire_timestamp_ms
        return api.FetchedPartition(
            partition=partition,
            offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp_ms,
            expire_timestamp_ms=-1 if expire is None or expire < 0 else expire,
        )

    def _offset_fetch(self, ref: RequestRef, body: api.OffsetFetch) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        offsets = self._offsets.group_offsets(body.group_id)
        topics: list[api.FetchedTopic] = []
        if body.topics is None:
            by_topic: dict[str, list[api.FetchedPartition]] = {}
            for (topic, partition), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(self._fetched(partition, value))
            topics = [api.FetchedTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        else:
            topics = [
                api.FetchedTopic(
                    name=t.name,
                    partitions=[self._fetched(p, offsets.get((t.name, p))) for p in t.partitions],
                )
                for t in body.topics
            ]
        return Result(
            replies=[Reply(ref, "OffsetFetch", body=api.OffsetFetchResponse(topics=topics))]
        )

    def _offset_delete(self, ref: RequestRef, body: api.OffsetDelete) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        consumer = self._consumer.groups.get(body.group_id)
        if consumer is not None:
            return self._delete_offsets(
                ref, body, lambda t: consumer.is_subscribed_to(t, self._consumer.topics)
            )
        group = self._groups.get(body.group_id)
        if group is None or group.state is GroupState.DEAD:
            raise ProtocolError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"group {body.group_id!r} does not exist"
            )
        if not group.is_empty and group.protocol_type != PROTOCOL_TYPE:
            raise ProtocolError(
                ErrorCode.NON_EMPTY_GROUP,
                f"group {body.group_id!r} is {group.state} and does not use the consumer "
                "protocol, so its subscriptions are unknown",
            )
        return self._delete_offsets(ref, body, group.is_subscribed_to_topic)

    def _delete_offsets(
        self, ref: RequestRef, body: api.OffsetDelete, subscribed_to: Callable[[str], bool]
    ) -> Result:
        records: list[Record] = []
        topics: list[api.TopicErrors] = []
        for t in body.topics:
            subscribed = subscribed_to(t.name)
            partitions = []
            for p in t.partitions:
                if subscribed:
                    partitions.append(
                        api.PartitionError(partition=p, error=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                    )
                    continue
                if self._offsets.get(body.group_id, t.name, p) is not None:
                    records.append(offset_commit_tombstone(body.group_id, t.name, p))
                partitions.append(api.PartitionError(partition=p))
            topics.append(api.TopicErrors(name=t.name, partitions=partitions))
        return Result(
            records, [Reply(ref, "OffsetDelete", body=api.OffsetDeleteResponse(topics=topics))]
        )

    # ================================================================= admin

    def _list_groups(self, ref: RequestRef, body: api.ListGroups) -> Result:
        wanted = {s.lower() for s in body.states_filter}
        listed = [
            api.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type or "", state=g.state.value
            )
            for g in self._groups.values()
        ]
        listed.extend(
            api.ListedGroup(
                group_id=g.group_id,
                protocol_type=PROTOCOL_TYPE,
                state=g.state.value,
                group_type="consumer",
            )
            for g in self._consumer.groups.values()
        )
        groups = sorted(
            (g for g in listed if not wanted or g.state.lower() in wanted),
            key=lambda g: g.group_id,
        )
        return Result(
            replies=[Reply(ref, "ListGroups", body=api.ListGroupsResponse(groups=groups))]
        )

    def _describe(self, group_id: str) -> api.DescribedGroup:
        if not group_id:
            return api.DescribedGroup(
                group_id=group_id,
                error=ErrorCode.INVALID_GROUP_ID,
                state=GroupState.DEAD.value,
                protocol_type="",
                protocol="",
            )
        group = self._groups.get(group_id)
        if group is None and group_id in self._consumer.groups:
            # Kafka's answer: this API describes classic groups (ConsumerGroupDescribe the rest).
            return api.DescribedGroup(
                group_id=group_id,
                error=ErrorCode.GROUP_ID_NOT_FOUND,
                state=GroupState.DEAD.value,
                protocol_type=PROTOCOL_TYPE,
                protocol="",
            )
        if group is None:
            return api.DescribedGroup(
                group_id=group_id,
                error=ErrorCode.GROUP_ID_NOT_FOUND,
                state=GroupState.DEAD.value,
                protocol_type="",
                protocol="",
            )
        # Kafka shows the protocol and member metadata only for a Stable group.
        stable = group.state is GroupState.STABLE
        members = [
            api.DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(group.protocol) if stable else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        return api.DescribedGroup(
            group_id=group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol=(group.protocol or "") if stable else "",
            generation=group.generation,
            leader=group.leader,
            members=members,
        )

    def _describe_groups(self, ref: RequestRef, body: api.DescribeGroups) -> Result:
        described = [self._describe(group_id) for group_id in body.groups]
        return Result(
            replies=[
                Reply(ref, "DescribeGroups", body=api.DescribeGroupsResponse(groups=described))
            ]
        )

    def _delete_groups(self, ref: RequestRef, body: api.DeleteGroups) -> Result:
        records: list[Record] = []
        results: list[api.GroupResult] = []
        deleted: set[str] = set()
        for group_id in body.groups:
            error = ErrorCode.NONE
            group = self._groups.get(group_id)
            consumer = self._consumer.groups.get(group_id)
            if not group_id:
                error = ErrorCode.INVALID_GROUP_ID
            elif group_id in deleted:
                pass  # named twice: deleted once
            elif consumer is not None:
                if consumer.is_empty:
                    deleted.add(group_id)
                    records.extend(
                        offset_commit_tombstone(group_id, topic, partition)
                        for topic, partition in sorted(self._offsets.group_offsets(group_id))
                    )
                    records.extend(consumer_group_tombstones(group_id))
                else:
                    error = ErrorCode.NON_EMPTY_GROUP
            elif group is None or group.state is GroupState.DEAD:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty:
                error = ErrorCode.NON_EMPTY_GROUP
            else:
                deleted.add(group_id)
                records.extend(
                    offset_commit_tombstone(group_id, topic, partition)
                    for topic, partition in sorted(self._offsets.group_offsets(group_id))
                )
                records.append(group_metadata_tombstone(group_id))
            results.append(api.GroupResult(group_id=group_id, error=error))
        return Result(
            records, [Reply(ref, "DeleteGroups", body=api.DeleteGroupsResponse(results=results))]
        )
