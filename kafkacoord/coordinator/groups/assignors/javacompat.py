"""Java behaviour the assignors depend on for Kafka-identical tie-breaking.

Kafka's assignors run in the group leader's JVM, and a few of their choices follow Java
library details rather than anything in the algorithm:

- **String order.** ``String.compareTo`` compares UTF-16 code units, which differs from
  Python's code-point order for characters above U+FFFF versus U+E000..U+FFFF.
  :func:`java_string_key` gives a sort key with Java's order.
- **``java.util.HashMap`` iteration order.** The sticky assignors walk the member map (a
  ``HashMap<String, ...>``) and, when several members could keep their extra owned
  partitions, the first ones *in hash order* win. :func:`java_hashmap_order` reproduces the
  order a default-constructed ``HashMap`` (capacity 16, load factor 0.75) iterates keys that
  were inserted in a given order: by bucket ``(h ^ (h >>> 16)) & (capacity - 1)``, then by
  insertion order within a bucket, with the table grown exactly as ``putVal`` grows it
  (including the early resize ``treeifyBin`` does when a bucket reaches 9 entries while the
  table is smaller than 64).
- **``java.util.HashSet`` first element.** The general sticky path moves "the first" partition
  of a ``HashSet<TopicPartition>``; :class:`JavaHashSet` tracks the set's growth, removals and
  re-insertions to answer that exactly.

Known limit: once a single bucket of a table of 64 or more slots holds 9 or more keys, Java
turns the bucket into a red-black tree whose iteration order differs from insertion order.
That needs 9+ colliding hashes and is not modelled; such buckets are walked in insertion order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from kafkacoord.coordinator.groups.partitioning import java_string_hash

__all__ = [
    "JavaHashSet",
    "java_hashmap_order",
    "java_string_key",
    "spread_hash",
    "topic_partition_hash",
]

K = TypeVar("K", bound=Hashable)

_MASK32 = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_DEFAULT_THRESHOLD = 12  # 16 * 0.75
_TREEIFY_COUNT = 9  # putVal calls treeifyBin when a bucket's list reaches 9 nodes
_MIN_TREEIFY_CAPACITY = 64
_MAX_CAPACITY = 1 << 30


def java_string_key(s: str) -> bytes:
    """A sort key ordering strings like Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def spread_hash(h: int) -> int:
    """``HashMap.hash``: the 32-bit hash XOR its upper 16 bits (as an unsigned int)."""
    h &= _MASK32
    return h ^ (h >> 16)


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """``org.apache.kafka.common.TopicPartition.hashCode()`` (signed 32-bit)."""
    topic, partition = tp
    h = (31 * (31 + partition) + java_string_hash(topic)) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


class _TableModel:
    """Capacity bookkeeping of a default ``HashMap`` (bucket counts, growth)."""

    __slots__ = ("capacity", "counts", "size", "threshold")

    def __init__(self) -> None:
        self.capacity = _DEFAULT_CAPACITY
        self.threshold = _DEFAULT_THRESHOLD
        self.counts: dict[int, int] = {}
        self.size = 0

    def _grow(self, live_hashes: Iterable[int]) -> None:
        if self.capacity >= _MAX_CAPACITY:
            return
        self.capacity <<= 1
        self.threshold <<= 1
        mask = self.capacity - 1
        counts: dict[int, int] = {}
        for h in live_hashes:
            b = h & mask
            counts[b] = counts.get(b, 0) + 1
        self.counts = counts

    def inserted(self, h: int, live_hashes: Callable[[], Iterable[int]]) -> None:
        """Account for a new key with spread hash ``h`` (already among ``live_hashes``)."""
        b = h & (self.capacity - 1)
        c = self.counts.get(b, 0) + 1
        self.counts[b] = c
        if c >= _TREEIFY_COUNT and self.capacity < _MIN_TREEIFY_CAPACITY:
            self._grow(live_hashes())  # treeifyBin on a small table resizes instead
        self.size += 1
        if self.size > self.threshold:
            self._grow(live_hashes())

    def removed(self, h: int) -> None:
        b = h & (self.capacity - 1)
        c = self.counts[b] - 1
        if c:
            self.counts[b] = c
        else:
            del self.counts[b]
        self.size -= 1


def java_hashmap_order(keys: Iterable[K], hash_of: Callable[[K], int]) -> list[K]:
    """The iteration order of ``new HashMap<>()`` after ``put``-ting ``keys`` in order.

    ``hash_of`` is the key's Java ``hashCode()``. Duplicate keys keep their first position.
    """
    unique: dict[K, int] = {}
    for key in keys:
        if key not in unique:
            unique[key] = spread_hash(hash_of(key))
    table = _TableModel()
    inserted: list[int] = []
    for h in unique.values():
        inserted.append(h)
        table.inserted(h, lambda: inserted)
    mask = table.capacity - 1
    ranked = sorted(
        ((h & mask, i, key) for i, (key, h) in enumerate(unique.items())),
        key=lambda item: (item[0], item[1]),
    )
    return [key for _, _, key in ranked]


class JavaHashSet(Generic[K]):
    """Enough of ``new HashSet<>()`` to know which element its iterator returns first."""

    __slots__ = ("_entries", "_hash_of", "_next_seq", "_table")

    def __init__(self, hash_of: Callable[[K], int]) -> None:
        self._hash_of = hash_of
        self._entries: dict[K, tuple[int, int]] = {}  # key -> (spread hash, insertion seq)
        self._table = _TableModel()
        self._next_seq = 0

    def add(self, key: K) -> None:
        if key in self._entries:
            return
        h = spread_hash(self._hash_of(key))
        self._entries[key] = (h, self._next_seq)
        self._next_seq += 1
        self._table.inserted(h, lambda: (e[0] for e in self._entries.values()))

    def discard(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._table.removed(entry[0])

    def first(self) -> K:
        """The element ``iterator().next()`` returns. Raises ``KeyError`` if empty."""
        if not self._entries:
            raise KeyError("first() on an empty set")
        mask = self._table.capacity - 1
        return min(self._entries.items(), key=lambda kv: (kv[1][0] & mask, kv[1][1]))[0]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        mask = self._table.capacity - 1
        ordered = sorted(self._entries.items(), key=lambda kv: (kv[1][0] & mask, kv[1][1]))
        return iter([key for key, _ in ordered])
