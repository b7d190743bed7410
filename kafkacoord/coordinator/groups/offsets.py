"""Committed offsets of one shard, and their expiry rules (KIP-211).

The store changes only through :meth:`OffsetStore.replay`; handlers read it and return
records. Expiry is decided per group:

- a group with members (not Empty) never expires its offsets;
- an Empty group's offsets expire ``retention`` after the later of the commit and the time
  the group became Empty (its state timestamp), so an admin reset of a long-empty group is
  kept for a full retention period;
- a standalone ("simple") consumer's offsets, with no group protocol, expire ``retention``
  after their last commit;
- an explicit expire timestamp (old clients' ``retention_time_ms``) wins, except that a group
  with members still keeps its offsets (Kafka applies no expiry condition to such groups).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue

from .classic_group import ClassicGroup
from .state import GroupState

__all__ = [
    "ExpirationPolicy",
    "OffsetStore",
    "expiration_policy",
    "expired_partitions",
    "is_expired",
    "java_string_length",
]

TopicPartition = tuple[str, int]

_NO_OFFSETS: Mapping[TopicPartition, OffsetCommitValue] = MappingProxyType({})


class OffsetStore:
    """group -> (topic, partition) -> committed value."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is not None:
            self._by_group.setdefault(key.group, {})[tp] = value
            return
        offsets = self._by_group.get(key.group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._by_group[key.group]

    def get(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        offsets = self._by_group.get(group_id)
        return None if offsets is None else offsets.get((topic, partition))

    def group_offsets(self, group_id: str) -> Mapping[TopicPartition, OffsetCommitValue]:
        offsets = self._by_group.get(group_id)
        return _NO_OFFSETS if offsets is None else MappingProxyType(offsets)

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._by_group

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._by_group))

    def clear(self) -> None:
        self._by_group.clear()

    def snapshot(self) -> dict[str, dict[TopicPartition, OffsetCommitValue]]:
        return {g: dict(offsets) for g, offsets in self._by_group.items()}

    def __len__(self) -> int:
        return sum(len(o) for o in self._by_group.values())


@dataclass(frozen=True, slots=True)
class ExpirationPolicy:
    """How a group's offsets age: from their commit, or from the later of the commit and
    ``empty_since_ms`` (when the group became Empty)."""

    empty_since_ms: int | None = None


def expiration_policy(group: ClassicGroup | None) -> ExpirationPolicy | None:
    """KIP-211: ``None`` means the group's offsets do not expire now."""
    if group is None or group.protocol_type is None:
        return ExpirationPolicy()  # standalone consumer: from the last commit
    if group.state is GroupState.EMPTY:
        return ExpirationPolicy(group.state_timestamp_ms)
    return None  # members exist: never


def is_expired(
    value: OffsetCommitValue, now_ms: int, retention_ms: int, policy: ExpirationPolicy
) -> bool:
    explicit = value.expire_timestamp_ms
    if explicit is not None and explicit >= 0:
        return now_ms >= explicit
    base = value.commit_timestamp_ms
    if policy.empty_since_ms is not None:
        base = max(base, policy.empty_since_ms)
    return now_ms - base >= retention_ms


def expired_partitions(
    offsets: Mapping[TopicPartition, OffsetCommitValue],
    now_ms: int,
    retention_ms: int,
    policy: ExpirationPolicy | None,
) -> list[TopicPartition]:
    """The partitions whose offsets have expired, sorted (deterministic record order)."""
    if policy is None:
        return []
    return sorted(tp for tp, v in offsets.items() if is_expired(v, now_ms, retention_ms, policy))


def java_string_length(s: str) -> int:
    """``String.length()``: UTF-16 code units, what Kafka compares with
    ``offset.metadata.max.bytes``."""
    if s.isascii():  # the usual case, and "" (no metadata): one unit per character
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)
