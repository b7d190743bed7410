"""Fold a chunk of raw records into the cache changes that reproduce its end state.

Compaction keeps only the last record per key, so the end state of a chunk
needs only each key's last record: keys are decoded once (and remembered),
values only when they win. A value that fails to decode is skipped and the
key's previous good record in the chunk wins instead, which is exactly what a
record-by-record replay that skips poison would produce.

Folds that need cross-key order (controller-epoch fencing) or strict mode
decode every record in order.

A folder may also keep the decoded winners (``keep_decoded``): a load into an
empty cache then hands its state to the shard without decoding it a second time.
An in-order fold keeps them in the log order of each key's last record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Message

from kafkacoord.codecs import (
    OFFSETS_TOPIC_TYPES,
    CodecError,
    RecordType,
    decode_key,
    decode_record,
    decode_value,
    record_type_of,
)
from kafkacoord.codecs.models import AvroModel, OffsetCommitValue

from .cache import NO_EXPIRY, Change
from .fencing import ControllerEpochFence, LeaderEpochFence, admitted_messages
from .poison import is_strict, record_poison

_KEY_CACHE_LIMIT = 1_000_000
_PARTITION_TAG = int(RecordType.PARTITION)


@dataclass(slots=True)
class FoldStats:
    records: int = 0
    poison: int = 0
    fenced: int = 0
    tombstones: int = 0

    def add(self, other: FoldStats) -> None:
        self.records += other.records
        self.poison += other.poison
        self.fenced += other.fenced
        self.tombstones += other.tombstones


def _never_expires(key: AvroModel, value: AvroModel) -> int:
    return NO_EXPIRY


@dataclass
class FoldPolicy:
    """What a topic may hold and how its records expire."""

    allowed: frozenset[RecordType]
    expiry: Callable[[AvroModel, AvroModel], int] = _never_expires
    # Replay in order with controller-epoch fencing (the metadata log).
    fenced_by_controller_epoch: bool = False
    # Drop records of a shard leader older than the newest ShardLeader record.
    fenced_by_leader_epoch: bool = False

    @property
    def expiring(self) -> bool:
        """Whether any value may expire (if not, the fold does not ask for expiry times)."""
        return self.expiry is not _never_expires


def offsets_policy(retention_ms: int) -> FoldPolicy:
    def expiry(key: AvroModel, value: AvroModel) -> int:
        if isinstance(value, OffsetCommitValue):
            return value.expires_at(retention_ms)
        return NO_EXPIRY

    return FoldPolicy(
        OFFSETS_TOPIC_TYPES,
        expiry=expiry,
        fenced_by_leader_epoch=True,
    )


def metadata_policy() -> FoldPolicy:
    return FoldPolicy(
        frozenset(
            {
                RecordType.CONTROLLER,
                RecordType.NODE,
                RecordType.TOPIC,
                RecordType.PARTITION,
                RecordType.REBALANCE,
                RecordType.DECISION,
            }
        ),
        fenced_by_controller_epoch=True,
    )


def _offset(msg: Message) -> int:
    return cast(int, msg.offset())


class _PoisonError(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class ChunkFolder:
    """Folds chunks of one topic; keeps decoded keys across chunks."""

    def __init__(
        self,
        topic: str,
        policy: FoldPolicy,
        *,
        strict: bool | None = None,
        controller_epoch: int = -1,
        leader_epoch: int = -1,
        keep_decoded: bool = False,
    ) -> None:
        self.topic = topic
        self.policy = policy
        # Unset: the process-wide switch of kafkacoord.storage.poison.
        self.strict = is_strict() if strict is None else strict
        self.controller_fence = ControllerEpochFence(controller_epoch)
        self.fence = LeaderEpochFence(leader_epoch)
        # raw key -> the decoded key and its type, or why it is poison
        self._keys: dict[bytes, tuple[AvroModel, RecordType] | str] = {}
        # raw key -> (key, value) of every live key folded so far, when kept.
        self.decoded: dict[bytes, tuple[AvroModel, AvroModel]] | None = {} if keep_decoded else None

    @property
    def controller_epoch(self) -> int:
        """The newest controller epoch folded so far (metadata topics)."""
        return self.controller_fence.epoch

    def fold(
        self, partition: int, messages: list[Message]
    ) -> tuple[dict[bytes, Change], FoldStats]:
        stats = FoldStats(records=len(messages))
        if self.policy.fenced_by_leader_epoch:
            messages, stats.fenced = admitted_messages(self.fence, messages)
        if self.strict or self.policy.fenced_by_controller_epoch:
            return self._fold_in_order(partition, messages, stats), stats
        return self._fold_last_wins(partition, messages, stats), stats

    # -- decoding ----------------------------------------------------------------

    def _key(self, raw: bytes | None) -> tuple[AvroModel, RecordType]:
        if raw is None:
            raise _PoisonError("record has no key")
        known = self._keys.get(raw)
        if known is None:
            try:
                rtype = record_type_of(raw)
                if rtype in self.policy.allowed:
                    known = (decode_key(raw), rtype)
                else:
                    known = f"record type {rtype.name} does not belong in this topic"
            except CodecError as exc:
                known = str(exc)
            if len(self._keys) >= _KEY_CACHE_LIMIT:
                self._keys.clear()
            self._keys[raw] = known
        if isinstance(known, str):
            raise _PoisonError(known)
        return known

    def _change(self, raw_key: bytes, key: AvroModel, rtype: RecordType, msg: Message) -> Change:
        raw_value = msg.value()
        if raw_value is None:
            return self._tombstone(raw_key)
        try:
            value = decode_value(rtype, raw_value)
        except CodecError as exc:
            raise _PoisonError(str(exc)) from exc
        return self._put(raw_key, key, value, raw_value, _offset(msg))

    def _put(
        self, raw_key: bytes, key: AvroModel, value: AvroModel, raw_value: bytes, offset: int
    ) -> Change:
        if self.decoded is not None:
            self.decoded[raw_key] = (key, value)
        return Change(raw_value, self.policy.expiry(key, value), offset)

    def _tombstone(self, raw_key: bytes) -> Change:
        if self.decoded is not None:
            self.decoded.pop(raw_key, None)
        return Change(None)

    def _poison(self, partition: int, offset: int, reason: str, stats: FoldStats) -> None:
        record_poison(self.topic, partition, offset, reason, strict=self.strict)
        stats.poison += 1

    # -- strategies ---------------------------------------------------------------

    def _fold_last_wins(
        self, partition: int, messages: list[Message], stats: FoldStats
    ) -> dict[bytes, Change]:
        last: dict[bytes | None, int] = {}
        for index, msg in enumerate(messages):
            last[msg.key()] = index
        changes: dict[bytes, Change] = {}
        for raw_key, index in last.items():
            try:
                key, rtype = self._key(raw_key)
            except _PoisonError as bad:
                for msg in self._with_key(messages, raw_key, index + 1):
                    self._poison(partition, _offset(msg), bad.reason, stats)
                continue
            assert raw_key is not None
            for msg in self._with_key(messages, raw_key, index + 1):
                try:
                    changes[raw_key] = self._change(raw_key, key, rtype, msg)
                    break
                except _PoisonError as bad:
                    self._poison(partition, _offset(msg), bad.reason, stats)
        stats.tombstones = sum(1 for c in changes.values() if c.value is None)
        return changes

    @staticmethod
    def _with_key(messages: list[Message], raw_key: bytes | None, end: int) -> Iterable[Message]:
        """Messages with ``raw_key`` before ``end``, newest first (only walked on poison)."""
        yield messages[end - 1]
        for index in range(end - 2, -1, -1):
            if messages[index].key() == raw_key:
                yield messages[index]

    def _fold_in_order(
        self, partition: int, messages: list[Message], stats: FoldStats
    ) -> dict[bytes, Change]:
        # A cold controller folds every record of the metadata log here: the fence, the
        # decoded map and the change are inlined.
        changes: dict[bytes, Change] = {}
        fence = self.controller_fence if self.policy.fenced_by_controller_epoch else None
        decoded = self.decoded
        expiry = self.policy.expiry if self.policy.expiring else None
        by_value = RecordType.PARTITION in self.policy.allowed
        for msg in messages:
            raw_key = msg.key()
            raw_value = msg.value()
            try:
                if by_value and raw_key and raw_value and raw_key[0] == _PARTITION_TAG:
                    # The value holds its key's fields: one decode, no key cache entry.
                    key, pair_value = decode_record(raw_key, raw_value)
                    assert pair_value is not None
                    value = pair_value
                else:
                    key, rtype = self._key(raw_key)
                    assert raw_key is not None
                    if raw_value is None:
                        changes[raw_key] = self._tombstone(raw_key)
                        continue
                    value = decode_value(rtype, raw_value)
            except (_PoisonError, CodecError) as bad:
                self._poison(partition, _offset(msg), getattr(bad, "reason", str(bad)), stats)
                continue
            if fence is not None and not fence.admit(value):
                stats.fenced += 1
                continue
            if decoded is not None:
                # Moved to the end: the map stays in the log order of the winners, which
                # replays with the same fencing as the whole log.
                decoded.pop(raw_key, None)
                decoded[raw_key] = (key, value)
            expires = NO_EXPIRY if expiry is None else expiry(key, value)
            changes[raw_key] = Change(raw_value, expires, msg.offset())  # type: ignore[arg-type]
        stats.tombstones = sum(1 for c in changes.values() if c.value is None)
        return changes
