"""StateCache / ShardStore on a real RocksDB (rocksdict) in a temporary directory."""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.storage.cache import (
    NO_EXPIRY,
    CacheBatch,
    Change,
    Checkpoint,
    Entry,
    ShardId,
    ShardStore,
    StateCache,
)

A = ShardId("__kc_offsets", 0)
B = ShardId("__kc_offsets", 1)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[StateCache]:
    with StateCache(tmp_path / "db") as opened:
        yield opened


@pytest.fixture
def store(cache: StateCache) -> ShardStore:
    return cache.shard(A)


def _apply(store: ShardStore, changes: dict[bytes, Change], offset: int = 1) -> None:
    store.apply(changes, next_offset=offset, identity="topic-id", now_ms=1_000)


# -- ShardId ----------------------------------------------------------------------------


def test_shard_id_prefix_layout() -> None:
    assert ShardId("t", 1).prefix == b"\x01t\x00\x00\x00\x01"
    assert ShardId("t2", 256).prefix == b"\x02t2\x00\x00\x01\x00"
    # Length is in bytes, not characters.
    assert ShardId("é", 0).prefix == b"\x02\xc3\xa9\x00\x00\x00\x00"
    assert str(ShardId("t", 3)) == "t-3"


def test_shard_id_topic_length_limit() -> None:
    assert len(ShardId("x" * 255, 0).prefix) == 1 + 255 + 4
    with pytest.raises(ValueError, match="too long"):
        _ = ShardId("x" * 256, 0).prefix
    with pytest.raises(ValueError, match="too long"):
        _ = ShardId("é" * 128, 0).prefix  # 256 bytes


# -- reads and writes -------------------------------------------------------------------


def test_empty_shard(store: ShardStore) -> None:
    assert store.checkpoint() is None
    assert store.get(b"k") is None
    assert store.get_many([b"a", b"b"]) == [None, None]
    assert store.expires_at(b"k") is None
    assert list(store.items()) == []
    assert store.count() == 0


def test_apply_then_read(store: ShardStore) -> None:
    _apply(store, {b"b": Change(b"vb"), b"a": Change(b"va", 50), b"c": Change(b"", 70)})
    assert store.get(b"a") == b"va"
    assert store.get(b"b") == b"vb"
    # An empty value is a value, not a tombstone.
    assert store.get(b"c") == b""
    assert store.get(b"zz") is None
    assert store.get_many([b"c", b"zz", b"a"]) == [b"", None, b"va"]
    assert store.get_many([]) == []
    assert list(store.items()) == [(b"a", b"va"), (b"b", b"vb"), (b"c", b"")]
    assert store.count() == 3
    assert store.expires_at(b"a") == 50
    assert store.expires_at(b"b") == NO_EXPIRY
    assert store.expires_at(b"zz") is None


def test_values_with_arbitrary_bytes(store: ShardStore) -> None:
    value = bytes(range(256))
    key = b"\x00\xff\x00"
    _apply(store, {key: Change(value, 2**63 - 1)})
    assert store.get(key) == value
    assert store.expires_at(key) == 2**63 - 1
    assert list(store.items()) == [(key, value)]


def test_overwrite_replaces_value(store: ShardStore) -> None:
    _apply(store, {b"k": Change(b"v1")})
    _apply(store, {b"k": Change(b"v2")}, offset=2)
    assert store.get(b"k") == b"v2"
    assert store.count() == 1


def test_tombstone_deletes(store: ShardStore) -> None:
    _apply(store, {b"a": Change(b"1"), b"b": Change(b"2")})
    _apply(store, {b"a": Change(None)}, offset=2)
    assert store.get(b"a") is None
    assert store.expires_at(b"a") is None
    assert list(store.items()) == [(b"b", b"2")]
    assert store.count() == 1


def test_tombstone_for_missing_key_is_harmless(store: ShardStore) -> None:
    _apply(store, {b"ghost": Change(None)}, offset=9)
    assert store.get(b"ghost") is None
    assert store.count() == 0
    checkpoint = store.checkpoint()
    assert checkpoint is not None
    assert checkpoint.next_offset == 9


def test_items_key_prefix(store: ShardStore) -> None:
    keys = [b"a", b"ab", b"abc", b"a\xff", b"a\xff\xff", b"b", b"\xff", b"\xff\xff", b""]
    _apply(store, {k: Change(b"v" + k) for k in keys})
    assert [k for k, _ in store.items(b"a")] == [b"a", b"ab", b"abc", b"a\xff", b"a\xff\xff"]
    assert [k for k, _ in store.items(b"ab")] == [b"ab", b"abc"]
    assert [k for k, _ in store.items(b"a\xff")] == [b"a\xff", b"a\xff\xff"]
    assert [k for k, _ in store.items(b"\xff")] == [b"\xff", b"\xff\xff"]
    assert list(store.items(b"abc")) == [(b"abc", b"vabc")]
    assert list(store.items(b"c")) == []
    assert [k for k, _ in store.items()] == sorted(keys)


# -- checkpoint -------------------------------------------------------------------------


def test_checkpoint_written_with_batch(store: ShardStore) -> None:
    store.apply({b"k": Change(b"v")}, next_offset=42, identity="id-ü", now_ms=123_456)
    assert store.checkpoint() == Checkpoint(next_offset=42, identity="id-ü", written_ms=123_456)
    # An empty batch still advances the checkpoint (a chunk of only poison, say).
    store.apply({}, next_offset=50, identity="id-2", now_ms=200_000)
    assert store.checkpoint() == Checkpoint(50, "id-2", 200_000)
    assert store.get(b"k") == b"v"


def test_checkpoint_defaults_to_wall_clock(store: ShardStore) -> None:
    before = int(time.time() * 1000)
    store.apply({}, next_offset=1, identity="x")
    after = int(time.time() * 1000)
    checkpoint = store.checkpoint()
    assert checkpoint is not None
    assert before <= checkpoint.written_ms <= after


# -- shard isolation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (ShardId("t", 0), ShardId("t", 1)),
        (ShardId("t", 0), ShardId("t2", 0)),
        (ShardId("t", 1), ShardId("t", 256)),
        (ShardId("t", 0), ShardId("tt", 0)),
        (ShardId("a", 0xFFFFFFFF), ShardId("a", 0)),
    ],
    ids=str,
)
def test_shards_are_isolated(cache: StateCache, first: ShardId, second: ShardId) -> None:
    one, two = cache.shard(first), cache.shard(second)
    one.apply(
        {b"k": Change(b"one", 10), b"only-one": Change(b"x")}, next_offset=5, identity="1", now_ms=1
    )
    two.apply({b"k": Change(b"two", 20)}, next_offset=7, identity="2", now_ms=2)

    assert one.get(b"k") == b"one"
    assert two.get(b"k") == b"two"
    assert two.get(b"only-one") is None
    assert list(one.items()) == [(b"k", b"one"), (b"only-one", b"x")]
    assert list(two.items()) == [(b"k", b"two")]
    assert one.count() == 2
    assert two.count() == 1
    assert (one.expires_at(b"k"), two.expires_at(b"k")) == (10, 20)
    assert one.checkpoint() == Checkpoint(5, "1", 1)
    assert two.checkpoint() == Checkpoint(7, "2", 2)

    two.apply({b"k": Change(None)}, next_offset=8, identity="2", now_ms=3)
    assert one.get(b"k") == b"one"
    assert one.expires_at(b"k") == 10


def test_clear_drops_one_shard_only(cache: StateCache) -> None:
    one, two = cache.shard(ShardId("t", 1)), cache.shard(ShardId("t", 2))
    one.apply({b"a": Change(b"1", 5)}, next_offset=3, identity="x", now_ms=1)
    two.apply({b"a": Change(b"2", 6)}, next_offset=4, identity="y", now_ms=1)

    one.clear()
    assert one.checkpoint() is None
    assert one.get(b"a") is None
    assert one.count() == 0
    assert one.expires_at(b"a") is None
    assert two.get(b"a") == b"2"
    assert two.expires_at(b"a") == 6
    assert two.checkpoint() == Checkpoint(4, "y", 1)
    assert cache.shards() == [ShardId("t", 2)]

    # A cleared shard can be rebuilt from scratch.
    one.apply({b"b": Change(b"3", 9)}, next_offset=1, identity="x", now_ms=2)
    assert list(one.items()) == [(b"b", b"3")]
    assert one.expires_at(b"b") == 9


def test_shards_lists_shards_with_data(cache: StateCache) -> None:
    assert cache.shards() == []
    wanted = [ShardId("t", 256), ShardId("t2", 0), ShardId("t", 1), ShardId("__kc_metadata", 0)]
    for shard in wanted:
        cache.shard(shard).apply({b"k": Change(b"v", 1)}, next_offset=1, identity="i", now_ms=1)
    # A shard with only a checkpoint (nothing folded yet) counts too.
    cache.shard(ShardId("empty", 3)).apply({}, next_offset=0, identity="i", now_ms=1)
    listed = cache.shards()
    assert len(listed) == len(set(listed))
    assert set(listed) == {*wanted, ShardId("empty", 3)}
    # Untouched shards are not listed.
    assert ShardId("t", 0) not in listed


# -- expiry times ----------------------------------------------------------------------


def test_each_write_keeps_the_values_own_expiry(store: ShardStore) -> None:
    _apply(store, {b"": Change(b"e", 0), b"k": Change(b"v1", 10), b"n": Change(b"5")})
    assert (store.expires_at(b""), store.expires_at(b"k"), store.expires_at(b"n")) == (
        0, 10, NO_EXPIRY,
    )  # fmt: skip
    _apply(store, {b"k": Change(b"v2", 50)}, offset=2)
    assert store.expires_at(b"k") == 50
    _apply(store, {b"k": Change(b"v3", NO_EXPIRY)}, offset=3)
    assert store.expires_at(b"k") == NO_EXPIRY
    _apply(store, {b"k": Change(None)}, offset=4)
    assert store.expires_at(b"k") is None


def test_writes_ignore_entries_of_the_retired_expiry_index(cache: StateCache) -> None:
    # Caches written before kept an index by expiry time under b"x": nothing reads it.
    store = cache.shard(A)
    cache._db.put(A.prefix + b"x" + (10).to_bytes(8, "big") + b"k", b"")
    _apply(store, {b"k": Change(b"v", 20)})
    assert list(store.items()) == [(b"k", b"v")]
    assert [e.key for e in store.entries()] == [b"k"]
    assert store.count() == 1
    assert cache.shards() == [A]
    store.clear()
    assert cache.shards() == []  # the clear takes them with it


# -- random sequences against a dict model ----------------------------------------------

MODEL_KEYS = [b"", b"a", b"ab", b"b", b"\x00", b"\xff", b"\xff\x00", b"k" * 40]
EXPIRIES = [NO_EXPIRY, 0, 1, 5, 9, 10, 2**32, 2**63 - 1]
changes = st.one_of(
    st.builds(Change, st.none()),
    st.builds(Change, st.binary(max_size=8), st.sampled_from(EXPIRIES)),
)
batches = st.dictionaries(st.sampled_from(MODEL_KEYS), changes, max_size=len(MODEL_KEYS))
_partitions = itertools.count()


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StateCache]:
    with StateCache(tmp_path_factory.mktemp("model") / "db") as opened:
        yield opened


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=st.lists(batches, max_size=12))
def test_random_apply_sequence_matches_dict_model(
    shared_cache: StateCache, sequence: list[dict[bytes, Change]]
) -> None:
    # A fresh shard per example, next to a neighbour that must stay untouched.
    shard = ShardId("model", next(_partitions))
    store = shared_cache.shard(shard)
    neighbour = shared_cache.shard(ShardId("model", 2**32 - 1))
    neighbour.apply({b"a": Change(b"n", 3)}, next_offset=1, identity="n", now_ms=0)

    model: dict[bytes, Change] = {}
    for offset, batch in enumerate(sequence, start=1):
        store.apply(batch, next_offset=offset, identity=f"id{offset}", now_ms=offset)
        for key, change in batch.items():
            if change.value is None:
                model.pop(key, None)
            else:
                model[key] = change

    assert list(store.items()) == sorted((k, c.value) for k, c in model.items())
    assert store.count() == len(model)
    assert store.get_many(MODEL_KEYS) == [
        model[k].value if k in model else None for k in MODEL_KEYS
    ]
    for key in MODEL_KEYS:
        assert store.expires_at(key) == (model[key].expires_at if key in model else None)
    for prefix in (b"a", b"\xff"):
        assert list(store.items(prefix)) == sorted(
            (k, c.value) for k, c in model.items() if k.startswith(prefix)
        )
    if sequence:
        assert store.checkpoint() == Checkpoint(len(sequence), f"id{len(sequence)}", len(sequence))
    else:
        assert store.checkpoint() is None
    assert list(neighbour.items()) == [(b"a", b"n")]
    assert neighbour.expires_at(b"a") == 3


# -- negative expiry --------------------------------------------------------------------


def test_negative_expiry_other_than_no_expiry_is_stored(store: ShardStore) -> None:
    store.apply({b"k": Change(b"v", -2), b"j": Change(b"w")}, next_offset=3, identity="i", now_ms=1)
    assert store.get(b"k") == b"v"
    assert store.get(b"j") == b"w"
    assert store.checkpoint() == Checkpoint(3, "i", 1)
    assert (store.expires_at(b"k"), store.expires_at(b"j")) == (-2, NO_EXPIRY)


# -- persistence ------------------------------------------------------------------------


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with StateCache(path) as first:
        store = first.shard(A)
        store.apply(
            {b"a": Change(b"1", 10), b"b": Change(b"2")}, next_offset=11, identity="id", now_ms=5
        )
        first.shard(B).apply({b"c": Change(b"3")}, next_offset=2, identity="idb", now_ms=6)
        store.apply({b"b": Change(None)}, next_offset=12, identity="id", now_ms=7)

    with StateCache(str(path)) as second:
        store = second.shard(A)
        assert list(store.items()) == [(b"a", b"1")]
        assert store.expires_at(b"a") == 10
        assert store.checkpoint() == Checkpoint(12, "id", 7)
        assert second.shard(B).get(b"c") == b"3"
        assert set(second.shards()) == {A, B}


def test_cache_creates_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "deeper" / "db"
    with StateCache(path) as opened:
        assert opened.path == path
        assert path.is_dir()
        assert opened.shards() == []


# -- offsets, re-seed rewrite, format ----------------------------------------------------


def test_entries_come_back_in_log_order_with_offsets(store: ShardStore) -> None:
    store.apply({b"z": Change(b"1", NO_EXPIRY, 5), b"a": Change(b"2", 99, 9)},
                next_offset=10, identity="id", now_ms=1)  # fmt: skip
    store.apply({b"m": Change(b"3", NO_EXPIRY, 10), b"z": Change(None)},
                next_offset=11, identity="id", now_ms=2)  # fmt: skip
    assert [(e.key, e.value, e.offset, e.expires_at) for e in store.entries()] == [
        (b"a", b"2", 9, 99),
        (b"m", b"3", 10, NO_EXPIRY),
    ]


def test_rewrite_replaces_the_shard_and_its_checkpoint(cache: StateCache) -> None:
    store, other = cache.shard(A), cache.shard(B)
    store.apply({b"old": Change(b"x", 50, 3), b"k": Change(b"v", NO_EXPIRY, 4)},
                next_offset=5, identity="old-id", now_ms=1)  # fmt: skip
    _apply(other, {b"keep": Change(b"y")})
    store.rewrite([Entry(b"k", b"v", 0, NO_EXPIRY)], next_offset=1, identity="new-id")
    assert [(e.key, e.offset) for e in store.entries()] == [(b"k", 0)]
    assert store.get(b"old") is None and store.expires_at(b"old") is None
    checkpoint = store.checkpoint()
    assert checkpoint is not None and (checkpoint.next_offset, checkpoint.identity) == (1, "new-id")
    assert other.get(b"keep") == b"y"


def test_a_shard_of_another_format_has_no_checkpoint(cache: StateCache) -> None:
    store = cache.shard(A)
    _apply(store, {b"k": Change(b"v")})
    assert store.checkpoint() is not None
    checkpoint = A.prefix + b"m" + b"checkpoint"
    cache._db.put(checkpoint, b"9" + cache._db.get(checkpoint)[1:])  # a format to come
    assert store.checkpoint() is None


def test_a_format_2_checkpoint_still_reads_and_the_next_fold_writes_format_3(
    cache: StateCache,
) -> None:
    # Format 2 kept offset, identity, time and format in keys of their own. An embedded
    # daemon's cache is the only copy of its state: an upgrade must not lose it.
    meta = A.prefix + b"m"
    for name, stored in ((b"offset", struct.pack(">q", 7)), (b"identity", b"id"),
                         (b"written_ms", struct.pack(">q", 1)), (b"format", b"2")):  # fmt: skip
        cache._db.put(meta + name, stored)
    store = cache.shard(A)
    assert store.checkpoint() == Checkpoint(7, "id", 1)
    store.apply({b"k": Change(b"v", NO_EXPIRY, 7)}, next_offset=8, identity="id", now_ms=2)
    assert store.checkpoint() == Checkpoint(8, "id", 2)
    # A format 1 cache (values without offsets) has no checkpoint: it is rebuilt.
    cache._db.put(B.prefix + b"m" + b"offset", struct.pack(">q", 7))
    cache._db.put(B.prefix + b"m" + b"format", b"1")
    assert cache.shard(B).checkpoint() is None


def test_synced_cache_writes_and_reopens(tmp_path: Path) -> None:
    with StateCache(tmp_path / "db", sync=True) as synced:
        assert synced.sync
        _apply(synced.shard(A), {b"k": Change(b"v", NO_EXPIRY, 0)})
    with StateCache(tmp_path / "db") as reopened:
        assert reopened.shard(A).get(b"k") == b"v"


# -- CacheBatch: many shards, one write --------------------------------------------------


def _stage(
    store: ShardStore, staged: CacheBatch, changes: dict[bytes, Change], offset: int
) -> None:
    store.stage(staged, changes, next_offset=offset, identity="topic-id", now_ms=1_000)


def test_staged_changes_of_many_shards_appear_together_on_write(cache: StateCache) -> None:
    a, b = cache.shard(A), cache.shard(B)
    staged = CacheBatch()
    _stage(a, staged, {b"k": Change(b"va", 50)}, 3)
    _stage(b, staged, {b"k": Change(b"vb")}, 7)
    assert staged
    # Nothing is visible before the write: the cache stays a prefix of the log.
    assert a.get(b"k") is None and b.get(b"k") is None
    assert a.checkpoint() is None and b.checkpoint() is None
    staged.write()
    assert not staged
    assert (a.get(b"k"), b.get(b"k")) == (b"va", b"vb")
    assert a.checkpoint() == Checkpoint(3, "topic-id", 1_000)
    assert b.checkpoint() == Checkpoint(7, "topic-id", 1_000)
    assert a.expires_at(b"k") == 50


def test_a_shard_staged_twice_ends_as_its_second_staging(cache: StateCache) -> None:
    a, b = cache.shard(A), cache.shard(B)
    staged = CacheBatch()
    _stage(a, staged, {b"k": Change(b"v1", 10), b"gone": Change(b"g")}, 2)
    _stage(b, staged, {b"x": Change(b"y")}, 1)
    _stage(a, staged, {b"k": Change(b"v2", 20), b"gone": Change(None)}, 3)
    assert a.get(b"k") is None and b.get(b"x") is None  # one write, at the end
    staged.write()
    assert list(a.items()) == [(b"k", b"v2")]
    assert a.expires_at(b"k") == 20
    checkpoint = a.checkpoint()
    assert checkpoint is not None and checkpoint.next_offset == 3
    assert b.get(b"x") == b"y"


def test_staging_matches_applying(tmp_path: Path) -> None:
    changes = {b"a": Change(b"1", 5), b"b": Change(None), b"c": Change(b"3")}
    with StateCache(tmp_path / "x") as x, StateCache(tmp_path / "y") as y:
        _apply(x.shard(A), {b"b": Change(b"old", 9)})
        _apply(y.shard(A), {b"b": Change(b"old", 9)})
        _apply(x.shard(A), changes, 4)
        staged = CacheBatch()
        _stage(y.shard(A), staged, changes, 4)
        staged.write()
        for cache in (x, y):
            assert list(cache.shard(A).items()) == [(b"a", b"1"), (b"c", b"3")]
            assert cache.shard(A).entries() == x.shard(A).entries()
