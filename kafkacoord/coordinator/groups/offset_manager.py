"""Committed offsets of one group shard (Kafka's ``OffsetMetadataManager``).

:class:`OffsetManager` answers OffsetCommit (classic and KIP-848 commit validation),
OffsetFetch and OffsetDelete, runs the periodic offset expiry, and replays offset
records into its :class:`~.offsets.OffsetStore`, which only replay changes. Handlers
read the groups to validate and return records; the one in-memory change they make is
expiry forgetting a group that was never durable, through the shard's undo log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from kafkacoord.codecs.batch_size import MAX_RECORDS_BYTES
from kafkacoord.codecs.models import (
    AdminOffset,
    AvroModel,
    GroupAdminAction,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_commit import OffsetCommitRequest
from kafkacoord.coordinator.protocol.binary_fetch import OffsetFetchRequest
from kafkacoord.coordinator.runtime.shard import Record, Reply, RequestRef, Result, encoded_bytes

from .audit import admin_records, is_admin_commit
from .classic_group import ClassicGroup
from .commit_replies import CommitReplies, Outcomes
from .config import GroupConfig
from .consumer import ConsumerGroups
from .consumer.records import group_tombstones as consumer_group_tombstones
from .consumer_protocol import PROTOCOL_TYPE
from .offsets import (
    ExpirationPolicy,
    OffsetStore,
    TopicPartition,
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
from .undo import UndoLog

__all__ = ["OffsetManager"]

_INT64_MAX: Final = 2**63 - 1
# An expiry run's records go out in one batch; what does not fit expires in the next run,
# this soon after (tombstones replay at once, so that run starts where this one stopped).
_EXPIRY_AGAIN_MS: Final = 1


class _ExpiryRun:
    """The records of one expiry run, up to what one batch holds."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.cut = False  # some expired record did not fit: run again soon
        self._room = MAX_RECORDS_BYTES

    def add(self, records: list[Record]) -> bool:
        """Take ``records`` whole if they fit; False (and a cut run) if not."""
        if self.cut:
            return False
        size = encoded_bytes(records)
        if size > self._room:
            self.cut = True
            return False
        self._room -= size
        self.records.extend(records)
        return True

    def tombstones(self, group_id: str, expired: list[TopicPartition]) -> bool:
        """Each expired offset's tombstone, as many as fit; True if all did."""
        for topic, partition in expired:
            if not self.add([offset_commit_tombstone(group_id, topic, partition)]):
                return False
        return True


class OffsetManager:
    """Offsets of the groups of one offsets partition."""

    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, ClassicGroup],
        consumer: ConsumerGroups,
        timers: ShardTimers,
        undo: UndoLog,
    ) -> None:
        self.config = config
        self.store = OffsetStore()
        self._groups = groups  # the shard's classic groups, shared
        self._consumer = consumer
        self._timers = timers
        self._undo = undo
        self._replies = CommitReplies()

    # ================================================================= replay

    def replay(self, key: OffsetCommitKey, value: AvroModel | None) -> None:
        if value is not None and not isinstance(value, OffsetCommitValue):
            raise TypeError(f"offset commit key with a {type(value).__name__} value")
        if (
            value is not None
            and key.group not in self._groups
            and key.group not in self._consumer.groups
        ):
            # Kafka's "simple" group: offsets committed without group membership.
            self._groups[key.group] = ClassicGroup(key.group)
        self.store.replay(key, value)

    def group_offsets(self, group_id: str) -> Mapping[TopicPartition, OffsetCommitValue]:
        return self.store.group_offsets(group_id)

    def clear(self) -> None:
        self.store.clear()

    # ================================================================= OffsetCommit

    def commit(self, ref: RequestRef, body: OffsetCommitRequest, now: int) -> Result:
        """A member commits at its generation (classic) or epoch (KIP-848); anyone may
        while the group is empty. Most of the traffic: kept to plain lookups."""
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
            return Result(replies=[_failed_commit(ref, body, exc)])

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
        if records and is_admin_commit(body.reset, body.member_id, body.group_instance_id):
            records[:0] = self._commit_audit(ref, body.group_id, records, now)
        return Result(records, [self._replies.reply(ref, outcomes)])

    def _commit_audit(
        self, ref: RequestRef, group_id: str, records: list[Record], now: int
    ) -> list[Record]:
        """The audit of a reset: each offset before and after."""
        offsets = []
        for record in records:
            key, value = record.key, record.value
            assert isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue)
            before = self.store.get(group_id, key.topic, key.partition)
            was = None if before is None else before.offset
            offsets.append(AdminOffset(key.topic, key.partition, was, value.offset))
        return admin_records(group_id, ref, GroupAdminAction.OFFSETS_RESET, now, offsets)

    # ================================================================= OffsetFetch

    def fetch(self, ref: RequestRef, body: OffsetFetchRequest) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        offsets = self.store.group_offsets(body.group_id)
        if body.topics is None:
            by_topic: dict[str, list[api.FetchedPartition]] = {}
            for (topic, partition), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(_fetched(partition, value))
            topics = [api.FetchedTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        else:
            topics = [
                api.FetchedTopic(
                    name=t.name,
                    partitions=[_fetched(p, offsets.get((t.name, p))) for p in t.partitions],
                )
                for t in body.topics
            ]
        response = api.OffsetFetchResponse(topics=topics)
        return Result(replies=[Reply(ref, "OffsetFetch", body=response)])

    # ================================================================= OffsetDelete

    def delete(self, ref: RequestRef, body: api.OffsetDelete, now: int) -> Result:
        if not body.group_id:
            raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        consumer = self._consumer.groups.get(body.group_id)
        if consumer is not None:
            topics = self._consumer.topics
            return self._delete(ref, body, lambda t: consumer.is_subscribed_to(t, topics), now)
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
        return self._delete(ref, body, group.is_subscribed_to_topic, now)

    def _delete(
        self,
        ref: RequestRef,
        body: api.OffsetDelete,
        subscribed_to: Callable[[str], bool],
        now: int,
    ) -> Result:
        records: list[Record] = []
        deleted: list[AdminOffset] = []
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
                before = self.store.get(body.group_id, t.name, p)
                if before is not None:
                    records.append(offset_commit_tombstone(body.group_id, t.name, p))
                    deleted.append(AdminOffset(t.name, p, before.offset, None))
                partitions.append(api.PartitionError(partition=p))
            topics.append(api.TopicErrors(name=t.name, partitions=partitions))
        response = api.OffsetDeleteResponse(topics=topics)
        if records:
            action = GroupAdminAction.OFFSETS_DELETED
            records[:0] = admin_records(body.group_id, ref, action, now, deleted)
        return Result(records, [Reply(ref, "OffsetDelete", body=response)])

    # ================================================================= expiry

    def schedule_expiry(self, now: int) -> None:
        interval = self.config.offsets_retention_check_interval_ms
        self._timers.schedule(EXPIRATION_TIMER, now + interval)

    def expire(self, now: int) -> Result:
        """The periodic expiry (KIP-211, :mod:`.offsets`): tombstones for expired offsets,
        and for a group left empty with no offsets. A run writes what one batch holds (a
        batch the broker refused would cost the shard its session) and the next run, a
        moment later, goes on."""
        run = _ExpiryRun()
        for group_id in sorted(set(self._consumer.groups)):
            if not self._expire_consumer_group(group_id, now, run):
                break
        retention = self.config.offsets_retention_ms
        for group_id in sorted(set(self._groups) | set(self.store.group_ids())):
            if run.cut:
                break
            if group_id in self._consumer.groups:
                continue
            group = self._groups.get(group_id)
            offsets = self.store.group_offsets(group_id)
            expired = expired_partitions(offsets, now, retention, expiration_policy(group))
            if (
                not run.tombstones(group_id, expired)
                or group is None
                or len(expired) != len(offsets)
                or not group.is_empty
                or group.pending_members
            ):
                continue
            if offsets or group.persisted is not None:
                run.add([group_metadata_tombstone(group_id)])
            else:
                # Never durable (e.g. a join that never completed): just forget it.
                self._undo.pop(self._groups, group_id)
        if run.cut:
            self._timers.schedule(EXPIRATION_TIMER, now + _EXPIRY_AGAIN_MS)
        else:
            self.schedule_expiry(now)
        return Result(records=run.records)

    def _expire_consumer_group(self, group_id: str, now: int, run: _ExpiryRun) -> bool:
        """Kafka's rule for consumer groups: offsets of topics the group subscribes to are
        kept; the others expire from their commit. An empty group whose offsets are all gone
        goes too. False if the run had no room for all of it."""
        group = self._consumer.groups[group_id]
        offsets = self.store.group_offsets(group_id)
        subscribed = {t for t, _ in offsets if group.is_subscribed_to(t, self._consumer.topics)}
        candidates = {tp: v for tp, v in offsets.items() if tp[0] not in subscribed}
        expired = expired_partitions(
            candidates, now, self.config.offsets_retention_ms, ExpirationPolicy()
        )
        if not run.tombstones(group_id, expired):
            return False
        if group.is_empty and len(expired) == len(offsets):
            return run.add(list(consumer_group_tombstones(group_id)))
        return True


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


def _failed_commit(ref: RequestRef, body: OffsetCommitRequest, exc: ProtocolError) -> Reply:
    """Kafka reports a group-level failure on every partition."""
    topics = [
        api.TopicErrors(
            name=t.name,
            partitions=[
                api.PartitionError(partition=p.partition, error=exc.code) for p in t.partitions
            ],
        )
        for t in body.topics
    ]
    response = api.OffsetCommitResponse(topics=topics)
    return Reply(ref, "OffsetCommit", exc.code, response, exc.message)
