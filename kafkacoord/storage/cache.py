"""RocksDB cache of the compacted internal topics, one key space per shard.

Layout inside one RocksDB (raw bytes everywhere)::

    <shard> b"d" <record key>             -> <expires_at: i64 BE> <offset: i64 BE> <record value>
    <shard> b"m" <name>                   -> checkpoint fields and the layout's format

``<shard>`` is ``len(topic): u8, topic, partition: u32 BE``, so one shard is one
contiguous range: dropping it is a single range delete. The checkpoint (next
offset to read, topic identity, wall time) is written in the same write batch
as the records it covers, so the cache is always a prefix of the log. Each value
keeps the offset it was written at, so the live keys can be written again in log
order (the embedded broker's re-seed). A shard written in another format has no
checkpoint: it is rebuilt from the log.

Writes never read: a change is a put or a delete. (An index by expiry time, under
``b"x"``, was kept until nothing read it: offsets expire in the group shards, from
memory. Caches written before may still hold its entries; nothing reads them, and
they go with the shard's next clear or rewrite.)
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from kafkacoord.codecs.models.base import value_class_with_init

NO_EXPIRY: Final = -1
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_DATA, _META = b"d", b"m"
# One key: the checkpoint is written with every fold, and each key is a memtable insert.
_META_CHECKPOINT = b"checkpoint"
# 2: values carry their log offset. 3: the same, with the checkpoint in one key (format,
# offset, time, identity) instead of four; format 2's is still read (an embedded
# daemon's cache is the only copy of its state), and the next fold writes format 3's.
FORMAT: Final = b"3"
_FORMAT_2 = b"2"
_FORMAT_2_KEYS = (b"offset", b"identity", b"written_ms", b"format")
_CHECKPOINT = struct.Struct(">qq")  # next_offset, written_ms; then the identity
_HEAD = struct.Struct(">qq")  # expires_at, offset
NO_OFFSET: Final = -1


@dataclass(frozen=True, slots=True, order=True)
class ShardId:
    """One partition of one internal topic."""

    topic: str
    partition: int

    @property
    def prefix(self) -> bytes:
        name = self.topic.encode()
        if len(name) > 255:
            raise ValueError(f"topic name too long for the cache: {self.topic!r}")
        return bytes((len(name),)) + name + struct.pack(">I", self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    next_offset: int
    identity: str
    written_ms: int


@value_class_with_init
class Change:
    """The new state of one key: a value (with its expiry) or a tombstone."""

    value: bytes | None
    expires_at: int = NO_EXPIRY
    # Where the record sits in the log: bookkeeping, not state, so not compared.
    offset: int = field(default=NO_OFFSET, compare=False)

    def __init__(
        self, value: bytes | None, expires_at: int = NO_EXPIRY, offset: int = NO_OFFSET
    ) -> None:
        self.value = value
        self.expires_at = expires_at
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Entry:
    """One live key as cached: its record and where the record sits in the log."""

    key: bytes
    value: bytes
    offset: int
    expires_at: int


def _successor(prefix: bytes) -> bytes:
    """Smallest byte string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        raise ValueError("prefix has no successor")
    return trimmed[:-1] + bytes((trimmed[-1] + 1,))


def _hold(*objects: object) -> None:
    """Nothing: a use that keeps ``objects`` alive up to the call."""


class StateCache:
    """The daemon's RocksDB; hands out one :class:`ShardStore` per shard."""

    def __init__(self, path: Path | str, *, sync: bool = False) -> None:
        """``sync``: every write waits for its WAL to reach the disk (the cache is then
        the durable copy, as with a broker that keeps nothing on restart)."""
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(self.path), options)
        self.sync = sync
        self._write_options = WriteOptions()
        self._write_options.sync = sync

    def shard(self, shard: ShardId) -> ShardStore:
        return ShardStore(self._db, shard, self._write_options)

    def shards(self) -> list[ShardId]:
        """Every shard that has a checkpoint in this cache."""
        found: list[ShardId] = []
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            key: bytes = it.key()
            size = key[0]
            shard = ShardId(key[1 : 1 + size].decode(), struct.unpack_from(">I", key, 1 + size)[0])
            found.append(shard)
            it.seek(_successor(shard.prefix))
        return found

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StateCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CacheBatch:
    """Changes of many shards, written in one atomic RocksDB write per database.

    A processor turn folds every shard's durable appends into one batch rather than
    writing once per shard. Nothing staged is visible until :meth:`write`.
    """

    def __init__(self) -> None:
        self._batches: dict[int, tuple[Rdict, WriteBatch, WriteOptions]] = {}

    def __bool__(self) -> bool:
        return bool(self._batches)

    def batch_for(self, db: Rdict, options: WriteOptions) -> WriteBatch:
        """The write batch of ``db``. ``options`` (a synced WAL, say) are the database's:
        the same for all its shards. A shard staged twice ends as its second staging
        says: a batch applies its operations in order."""
        entry = self._batches.get(id(db))
        if entry is None:
            entry = self._batches[id(db)] = (db, WriteBatch(raw_mode=True), options)
        return entry[1]

    def write(self) -> None:
        """Write everything staged; the batch is empty afterwards, even if a write fails."""
        batches = list(self._batches.values())
        self._batches.clear()
        for db, batch, options in batches:
            db.write(batch, options)


class ShardStore:
    """Reads and atomic writes of one shard's key space."""

    def __init__(self, db: Rdict, shard: ShardId, write_options: WriteOptions) -> None:
        self._db = db
        self._write_options = write_options
        self.shard = shard
        self._prefix = shard.prefix
        self._data = self._prefix + _DATA
        self._meta = self._prefix + _META

    # -- reads ---------------------------------------------------------------

    def checkpoint(self) -> Checkpoint | None:
        stored: bytes | None = self._db.get(self._meta + _META_CHECKPOINT)
        if stored is None:
            return self._format_2_checkpoint()
        head = len(FORMAT) + _CHECKPOINT.size
        if len(stored) < head or not stored.startswith(FORMAT):
            return None
        next_offset, written = _CHECKPOINT.unpack_from(stored, len(FORMAT))
        return Checkpoint(next_offset, stored[head:].decode(), written)

    def _format_2_checkpoint(self) -> Checkpoint | None:
        offset, identity, written, layout = self._get_many(
            [self._meta + name for name in _FORMAT_2_KEYS]
        )
        if offset is None or identity is None or written is None or layout != _FORMAT_2:
            return None
        return Checkpoint(_I64.unpack(offset)[0], identity.decode(), _I64.unpack(written)[0])

    def _get_many(self, keys: list[bytes]) -> list[bytes | None]:
        # rocksdict multi-get: a list of keys gives a list of values (None if absent).
        return cast("list[bytes | None]", self._db.get(cast(Any, keys)))

    def get(self, key: bytes) -> bytes | None:
        stored: bytes | None = self._db.get(self._data + key)
        return None if stored is None else stored[_HEAD.size :]

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        stored = self._get_many([self._data + k for k in keys])
        return [None if s is None else s[_HEAD.size :] for s in stored]

    def expires_at(self, key: bytes) -> int | None:
        stored: bytes | None = self._db.get(self._data + key)
        return None if stored is None else int(_HEAD.unpack_from(stored)[0])

    def items(self, key_prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """(record key, record value) in key order, optionally under a key prefix."""
        start = self._data + key_prefix
        skip = len(self._data)
        for key, stored in self._scan(start):
            yield key[skip:], stored[_HEAD.size :]

    def entries(self) -> list[Entry]:
        """Every live key with its offset, in log order (keys of unknown offset first)."""
        skip = len(self._data)
        found = []
        for key, stored in self._scan(self._data):
            expires_at, offset = _HEAD.unpack_from(stored)
            found.append(Entry(key[skip:], stored[_HEAD.size :], offset, expires_at))
        found.sort(key=lambda e: e.offset)
        return found

    def count(self) -> int:
        return sum(1 for _ in self._scan(self._data))

    def _scan(self, start: bytes, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        options = ReadOptions()
        options.set_iterate_upper_bound(end if end is not None else _successor(start))
        it = self._db.iter(options)
        it.seek(start)
        while it.valid():
            yield it.key(), it.value()
            it.next()
        # The iterator reads its upper bound from the options, which rocksdict does not keep
        # alive for it; compiled code drops a local after its last use, so use it here.
        _hold(options)

    # -- writes --------------------------------------------------------------

    def apply(
        self,
        changes: Mapping[bytes, Change],
        *,
        next_offset: int,
        identity: str,
        now_ms: int | None = None,
    ) -> None:
        """Write ``changes`` and the checkpoint in one atomic batch."""
        batch = WriteBatch(raw_mode=True)
        self._fill(batch, changes, next_offset, identity, now_ms)
        self._db.write(batch, self._write_options)

    def stage(
        self,
        staged: CacheBatch,
        changes: Mapping[bytes, Change],
        *,
        next_offset: int,
        identity: str,
        now_ms: int | None = None,
    ) -> None:
        """As :meth:`apply`, but into ``staged``, written later with other shards' changes."""
        batch = staged.batch_for(self._db, self._write_options)
        self._fill(batch, changes, next_offset, identity, now_ms)

    def _fill(
        self,
        batch: WriteBatch,
        changes: Mapping[bytes, Change],
        next_offset: int,
        identity: str,
        now_ms: int | None,
    ) -> None:
        data, pack = self._data, _HEAD.pack
        for key, change in changes.items():
            if change.value is None:
                batch.delete(data + key)  # deleting an absent key is harmless
            else:
                batch.put(data + key, pack(change.expires_at, change.offset) + change.value)
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        self._put_checkpoint(batch, next_offset, identity, stamp)

    def _put_checkpoint(
        self, batch: WriteBatch, next_offset: int, identity: str, stamp: int
    ) -> None:
        stored = FORMAT + _CHECKPOINT.pack(next_offset, stamp) + identity.encode()
        batch.put(self._meta + _META_CHECKPOINT, stored)

    def rewrite(self, entries: list[Entry], *, next_offset: int, identity: str) -> None:
        """Replace the whole shard by ``entries`` and a new checkpoint, atomically.

        After a re-seed the same keys live at new offsets of a new topic; a crash
        leaves either the old shard or the new one, never a mix.
        """
        batch = WriteBatch(raw_mode=True)
        batch.delete_range(self._prefix, _successor(self._prefix))
        for entry in entries:
            batch.put(self._data + entry.key,
                      _HEAD.pack(entry.expires_at, entry.offset) + entry.value)  # fmt: skip
        self._put_checkpoint(batch, next_offset, identity, int(time.time() * 1000))
        self._db.write(batch, self._write_options)

    def clear(self) -> None:
        """Drop the whole shard, checkpoint included (before a rebuild)."""
        batch = WriteBatch(raw_mode=True)
        batch.delete_range(self._prefix, _successor(self._prefix))
        self._db.write(batch, self._write_options)
