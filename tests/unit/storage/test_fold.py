"""ChunkFolder: folding chunks of raw records into cache changes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import CodecError, RecordType, decode_record, encode_key, encode_value
from kafkacoord.codecs.models import (
    AvroModel,
    ControllerKey,
    ControllerValue,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    ShardLeaderKey,
    ShardLeaderValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.storage.cache import NO_EXPIRY, Change
from kafkacoord.storage.errors import PoisonRecordError
from kafkacoord.storage.fencing import ControllerEpochFence, epoch_headers
from kafkacoord.storage.fold import (
    ChunkFolder,
    FoldPolicy,
    FoldStats,
    metadata_policy,
    offsets_policy,
)
from tests.unit.messages import FakeMessage

RETENTION = 7 * 24 * 3600 * 1000
T0 = 1_700_000_000_000
OFFSETS = "__kc_offsets"
METADATA = "__kc_metadata"


def chunk(*pairs: tuple[bytes | None, bytes | None], start: int = 0) -> list[Any]:
    return [FakeMessage(k, v, start + i) for i, (k, v) in enumerate(pairs)]


def oc_key(group: str = "g", topic: str = "t", partition: int = 0) -> bytes:
    return encode_key(OffsetCommitKey(group, topic, partition))


def oc_value(offset: int, ts: int = T0, expire: int | None = None) -> bytes:
    return encode_value(OffsetCommitValue(offset, f"m{offset}", ts, 1, expire))


def offsets_folder(*, strict: bool = False) -> ChunkFolder:
    return ChunkFolder(OFFSETS, offsets_policy(RETENTION), strict=strict)


# Poison values for an offset-commit key: undecodable in different ways.
POISON_VALUES = [
    b"",  # shorter than the header
    b"\x00\x02",  # header only
    b"\x00\x63" + oc_value(1)[2:],  # unknown version
    oc_value(1)[:-1],  # truncated
    oc_value(1) + b"\x00",  # trailing bytes
]
GROUP_VALUE = encode_value(
    GroupMetadataValue(
        "consumer", 2, T0, (GroupMember("m", "c", "h", 1, 1, b"", b""),), "range", "m"
    )
)
NODE_KEY = encode_key(NodeKey(1))
NODE_VALUE = encode_value(NodeValue(1, "inc", 1, False, T0, 5))


# -- offsets: last wins -----------------------------------------------------------------


def test_empty_chunk() -> None:
    changes, stats = offsets_folder().fold(0, [])
    assert changes == {}
    assert stats == FoldStats()


def test_last_value_per_key_wins() -> None:
    a, b = oc_key(partition=0), oc_key(partition=1)
    msgs = chunk(
        (a, oc_value(1)), (b, oc_value(10)), (a, oc_value(2)), (a, oc_value(3)), (b, oc_value(11))
    )
    changes, stats = offsets_folder().fold(4, msgs)
    assert changes == {
        a: Change(oc_value(3), T0 + RETENTION),
        b: Change(oc_value(11), T0 + RETENTION),
    }
    assert stats == FoldStats(records=5, poison=0, fenced=0, tombstones=0)


def test_changes_carry_the_offset_of_the_record_that_won() -> None:
    a, b = oc_key(partition=0), oc_key(partition=1)
    msgs = chunk((a, oc_value(1)), (b, oc_value(10)), (a, oc_value(2)), (b, b""), start=40)
    changes, _ = offsets_folder().fold(0, msgs)
    # b's last value is poison: the previous good one wins, with its own offset.
    assert {k: c.offset for k, c in changes.items()} == {a: 42, b: 41}
    strict_changes, _ = ChunkFolder(METADATA, metadata_policy()).fold(
        0, chunk((NODE_KEY, NODE_VALUE), (NODE_KEY, NODE_VALUE), start=7)
    )
    assert strict_changes[NODE_KEY].offset == 8


def test_tombstone_as_last_yields_delete() -> None:
    a, b = oc_key(partition=0), oc_key(partition=1)
    msgs = chunk((a, oc_value(1)), (b, None), (a, None), (b, oc_value(2)))
    changes, stats = offsets_folder().fold(0, msgs)
    assert changes == {a: Change(None), b: Change(oc_value(2), T0 + RETENTION)}
    assert changes[a].value is None
    assert stats.tombstones == 1


@pytest.mark.parametrize(
    "poison", POISON_VALUES, ids=["empty", "header", "version", "truncated", "trailing"]
)
def test_poison_last_value_falls_back_to_previous_good(poison: bytes) -> None:
    a = oc_key()
    msgs = chunk((a, oc_value(1)), (a, oc_value(2)), (a, poison))
    changes, stats = offsets_folder().fold(0, msgs)
    assert changes == {a: Change(oc_value(2), T0 + RETENTION)}
    assert stats.poison == 1
    assert stats.records == 3


def test_several_trailing_poison_values_fall_back_past_all_of_them() -> None:
    a = oc_key()
    msgs = chunk((a, oc_value(1)), (a, None), (a, POISON_VALUES[0]), (a, POISON_VALUES[3]))
    changes, stats = offsets_folder().fold(0, msgs)
    # The previous good record was a tombstone: it wins.
    assert changes == {a: Change(None)}
    assert stats.poison == 2
    assert stats.tombstones == 1


def test_key_with_only_poison_values_yields_no_change() -> None:
    a, b = oc_key(partition=0), oc_key(partition=1)
    msgs = chunk(
        (a, POISON_VALUES[0]), (b, oc_value(5)), (a, POISON_VALUES[1]), (a, POISON_VALUES[2])
    )
    changes, stats = offsets_folder().fold(0, msgs)
    assert changes == {b: Change(oc_value(5), T0 + RETENTION)}
    assert stats.poison == 3


def test_poison_keys_are_counted_once_per_occurrence() -> None:
    good = oc_key()
    unknown_tag = b"\xff\x01abc"
    garbage = bytes((RecordType.OFFSET_COMMIT, 1)) + b"\x99"  # truncated Avro body
    bad_version = bytes((RecordType.OFFSET_COMMIT, 7)) + oc_key()[2:]
    msgs = chunk(
        (None, oc_value(1)),
        (unknown_tag, oc_value(1)),
        (good, oc_value(1)),
        (None, None),
        (garbage, oc_value(1)),
        (unknown_tag, None),
        (None, oc_value(2)),
        (bad_version, oc_value(3)),
    )
    changes, stats = offsets_folder().fold(0, msgs)
    assert changes == {good: Change(oc_value(1), T0 + RETENTION)}
    assert stats.poison == 7  # 3 x None, 2 x unknown tag, 1 x garbage, 1 x bad version


def test_poison_key_is_still_poison_in_a_later_chunk() -> None:
    folder = offsets_folder()
    bad = b"\xfe\x01"
    _, first = folder.fold(0, chunk((bad, oc_value(1)), (oc_key(), oc_value(1))))
    changes, second = folder.fold(0, chunk((bad, oc_value(2)), (bad, oc_value(3)), start=2))
    assert first.poison == 1
    assert second.poison == 2
    assert changes == {}


def test_record_type_not_allowed_in_topic_is_poison() -> None:
    good = oc_key()
    msgs = chunk((NODE_KEY, NODE_VALUE), (good, oc_value(3)), (NODE_KEY, None))
    changes, stats = offsets_folder().fold(0, msgs)
    assert changes == {good: Change(oc_value(3), T0 + RETENTION)}
    assert stats.poison == 2


def test_offsets_record_in_metadata_topic_is_poison() -> None:
    folder = ChunkFolder(METADATA, metadata_policy())
    msgs = chunk((oc_key(), oc_value(1)), (NODE_KEY, NODE_VALUE))
    changes, stats = folder.fold(0, msgs)
    assert changes == {NODE_KEY: Change(NODE_VALUE, NO_EXPIRY)}
    assert stats.poison == 1


# -- expiry -----------------------------------------------------------------------------


def test_offset_commit_expiry_is_commit_time_plus_retention() -> None:
    a = oc_key()
    changes, _ = ChunkFolder(OFFSETS, offsets_policy(60_000)).fold(
        0, chunk((a, oc_value(1, ts=5_000)))
    )
    assert changes[a].expires_at == 65_000


def test_explicit_expire_timestamp_wins_in_fold() -> None:
    a = oc_key()
    changes, _ = offsets_folder().fold(0, chunk((a, oc_value(1, ts=5_000, expire=9_999))))
    assert changes[a].expires_at == 9_999


def test_group_metadata_never_expires() -> None:
    g = encode_key(GroupMetadataKey("group-1"))
    changes, stats = offsets_folder().fold(0, chunk((g, GROUP_VALUE)))
    assert changes == {g: Change(GROUP_VALUE, NO_EXPIRY)}
    assert stats.poison == 0


def test_default_policy_expiry_is_no_expiry() -> None:
    policy = FoldPolicy(frozenset({RecordType.OFFSET_COMMIT}))
    a = oc_key()
    changes, _ = ChunkFolder(OFFSETS, policy).fold(0, chunk((a, oc_value(1))))
    assert changes[a].expires_at == NO_EXPIRY


# -- strict mode ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (oc_key(), POISON_VALUES[3], "value: "),
        (b"\xff\x01", oc_value(1), "unknown record type tag 255"),
        (None, oc_value(1), "record has no key"),
        (NODE_KEY, NODE_VALUE, "NODE does not belong"),
    ],
    ids=["value", "tag", "none", "foreign"],
)
def test_strict_mode_raises_with_position(key: bytes | None, value: bytes, reason: str) -> None:
    msgs = chunk((oc_key(), oc_value(1)), (key, value), start=40)
    with pytest.raises(PoisonRecordError) as info:
        offsets_folder(strict=True).fold(3, msgs)
    assert f"{OFFSETS}-3@41" in str(info.value)
    assert reason in str(info.value)
    assert (info.value.topic, info.value.partition, info.value.offset) == (OFFSETS, 3, 41)


def test_strict_mode_raises_even_for_poison_that_last_wins_would_skip() -> None:
    # Strict replays in order: an overwritten poison record still stops the fold.
    a = oc_key()
    msgs = chunk((a, POISON_VALUES[0]), (a, oc_value(2)))
    assert offsets_folder().fold(0, msgs)[0] == {a: Change(oc_value(2), T0 + RETENTION)}
    with pytest.raises(PoisonRecordError, match="@0"):
        offsets_folder(strict=True).fold(0, msgs)


def test_strict_mode_on_clean_chunk_matches_lenient() -> None:
    a, b = oc_key(partition=0), oc_key(partition=1)
    msgs = chunk((a, oc_value(1)), (b, None), (a, oc_value(2)), (b, oc_value(3)), (a, None))
    assert offsets_folder(strict=True).fold(0, msgs) == offsets_folder().fold(0, msgs)


# -- metadata: controller-epoch fencing -------------------------------------------------

CONTROLLER = encode_key(ControllerKey())


def controller(epoch: int) -> bytes:
    return encode_value(ControllerValue(epoch, epoch * 10, f"inc-{epoch}", T0 + epoch))


def partition_key(p: int) -> bytes:
    return encode_key(PartitionKey("orders", p))


def partition_value(p: int, controller_epoch: int, leader: int = 1) -> bytes:
    return encode_value(
        PartitionValue(
            "orders", p, PartitionState.ONLINE, (1, 2), (1, 2), leader, 0, 0, T0, controller_epoch
        )
    )


def metadata_folder(controller_epoch: int = -1, *, strict: bool = False) -> ChunkFolder:
    return ChunkFolder(
        METADATA, metadata_policy(), strict=strict, controller_epoch=controller_epoch
    )


def test_decision_of_older_controller_is_fenced() -> None:
    msgs = chunk(
        (CONTROLLER, controller(5)),
        (partition_key(0), partition_value(0, 4)),
        (partition_key(1), partition_value(1, 5)),
    )
    folder = metadata_folder()
    changes, stats = folder.fold(0, msgs)
    assert changes == {
        CONTROLLER: Change(controller(5), NO_EXPIRY),
        partition_key(1): Change(partition_value(1, 5), NO_EXPIRY),
    }
    assert stats.fenced == 1
    assert stats.poison == 0
    assert folder.controller_epoch == 5


def test_fenced_record_does_not_overwrite_earlier_good_value() -> None:
    msgs = chunk(
        (CONTROLLER, controller(5)),
        (partition_key(0), partition_value(0, 5, leader=1)),
        (partition_key(0), partition_value(0, 4, leader=2)),
    )
    changes, stats = metadata_folder().fold(0, msgs)
    assert changes[partition_key(0)] == Change(partition_value(0, 5, leader=1), NO_EXPIRY)
    assert stats.fenced == 1


def test_newer_controller_raises_the_fence() -> None:
    msgs = chunk(
        (CONTROLLER, controller(5)),
        (partition_key(0), partition_value(0, 5)),
        (CONTROLLER, controller(6)),
        (partition_key(1), partition_value(1, 5)),  # now stale
        (partition_key(2), partition_value(2, 6)),
    )
    folder = metadata_folder()
    changes, stats = folder.fold(0, msgs)
    assert set(changes) == {CONTROLLER, partition_key(0), partition_key(2)}
    assert changes[CONTROLLER].value == controller(6)
    assert stats.fenced == 1
    assert folder.controller_epoch == 6


def test_controller_value_with_lower_epoch_is_dropped() -> None:
    msgs = chunk(
        (CONTROLLER, controller(5)), (CONTROLLER, controller(3)), (CONTROLLER, controller(5))
    )
    folder = metadata_folder()
    changes, stats = folder.fold(0, msgs)
    assert changes == {CONTROLLER: Change(controller(5), NO_EXPIRY)}
    assert stats.fenced == 1
    assert folder.controller_epoch == 5


def test_constructor_epoch_seeds_the_fence() -> None:
    msgs = chunk(
        (partition_key(0), partition_value(0, 6)),
        (partition_key(1), partition_value(1, 7)),
        (CONTROLLER, controller(6)),
        (encode_key(TopicKey("orders")), encode_value(TopicValue("orders", "id", 2, 2, T0, 6))),
        (NODE_KEY, encode_value(NodeValue(1, "inc", 1, False, T0, 8))),
    )
    folder = metadata_folder(controller_epoch=7)
    changes, stats = folder.fold(0, msgs)
    assert set(changes) == {partition_key(1), NODE_KEY}
    assert stats.fenced == 3  # partition ce 6, controller 6, topic ce 6
    assert folder.controller_epoch == 7


def test_fence_carries_across_chunks() -> None:
    folder = metadata_folder()
    folder.fold(0, chunk((CONTROLLER, controller(5))))
    changes, stats = folder.fold(0, chunk((partition_key(0), partition_value(0, 4)), start=1))
    assert changes == {}
    assert stats.fenced == 1


def test_metadata_tombstones_and_poison() -> None:
    msgs = chunk(
        (CONTROLLER, controller(5)),
        (partition_key(0), None),
        (partition_key(1), partition_value(1, 5)[:-2]),
        (None, partition_value(1, 5)),
    )
    changes, stats = metadata_folder().fold(0, msgs)
    assert changes == {CONTROLLER: Change(controller(5), NO_EXPIRY), partition_key(0): Change(None)}
    assert stats == FoldStats(records=4, poison=2, fenced=0, tombstones=1)


def test_metadata_strict_mode_raises() -> None:
    msgs = chunk((CONTROLLER, controller(5)), (partition_key(1), b"\x00\x01\xff"), start=7)
    with pytest.raises(PoisonRecordError, match=rf"{METADATA}-2@8"):
        metadata_folder(strict=True).fold(2, msgs)


# -- property: lazy last-wins fold == naive in-order replay -----------------------------

PROPERTY_RETENTION = 1_000
VALID_KEYS = [oc_key(partition=0), oc_key(partition=1), encode_key(GroupMetadataKey("g"))]
POISON_KEYS: list[bytes | None] = [None, b"\xff\x01", NODE_KEY, b"\x0b\x01\x02"]


@st.composite
def records(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(POISON_KEYS)), oc_value(draw(st.integers(0, 9)))
    key = draw(st.sampled_from(VALID_KEYS))
    kind = draw(st.sampled_from(["value", "value", "poison", "tombstone"]))
    if kind == "tombstone":
        return key, None
    if kind == "poison":
        return key, draw(st.sampled_from(POISON_VALUES))
    if key[0] == RecordType.GROUP_METADATA:
        return key, GROUP_VALUE
    ts = draw(st.integers(0, 10**6))
    expire = draw(st.none() | st.integers(0, 10**7))
    return key, oc_value(draw(st.integers(0, 10**6)), ts=ts, expire=expire)


def naive_fold(msgs: list[Any]) -> tuple[dict[bytes, Change], int]:
    """Decode every record in order, skipping poison: the meaning the fold must match."""
    allowed = {RecordType.OFFSET_COMMIT, RecordType.GROUP_METADATA}
    state: dict[bytes, Change] = {}
    poison = 0
    for msg in msgs:
        try:
            _, value = decode_record(msg.key(), msg.value())
        except CodecError:
            poison += 1
            continue
        if RecordType(msg.key()[0]) not in allowed:
            poison += 1
            continue
        state[msg.key()] = Change(msg.value(), _expiry(value))
    return state, poison


def _expiry(value: AvroModel | None) -> int:
    if value is None:
        return NO_EXPIRY
    if isinstance(value, OffsetCommitValue):
        return value.expires_at(PROPERTY_RETENTION)
    return NO_EXPIRY


def lazy_poison_count(msgs: list[Any]) -> int:
    """What the lazy fold decodes: every poison-key record, plus per key the poison values
    after its last good record (all of them when there is none)."""
    count = 0
    trailing: dict[bytes, int] = {}
    for msg in msgs:
        key = msg.key()
        if key not in VALID_KEYS:
            count += 1
            continue
        value = msg.value()
        bad = value is not None and value in POISON_VALUES
        trailing[key] = trailing.get(key, 0) + 1 if bad else 0
    return count + sum(trailing.values())


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(records(), max_size=30))
def test_last_wins_fold_equals_naive_replay(pairs: list[tuple[bytes | None, bytes | None]]) -> None:
    msgs = chunk(*pairs)
    expected, naive_poison = naive_fold(msgs)

    folder = ChunkFolder(OFFSETS, offsets_policy(PROPERTY_RETENTION))
    changes, stats = folder.fold(0, msgs)
    assert changes == expected
    assert stats.records == len(msgs)
    assert stats.tombstones == sum(1 for c in expected.values() if c.value is None)
    assert stats.poison == lazy_poison_count(msgs)
    assert stats.poison <= naive_poison

    # The in-order path (used for strict and fenced folds) agrees, and counts every poison.
    in_order_policy = FoldPolicy(
        frozenset({RecordType.OFFSET_COMMIT, RecordType.GROUP_METADATA}),
        expiry=offsets_policy(PROPERTY_RETENTION).expiry,
        fenced_by_controller_epoch=True,
    )
    in_order, in_order_stats = ChunkFolder(OFFSETS, in_order_policy).fold(0, msgs)
    assert in_order == expected
    assert in_order_stats.poison == naive_poison
    assert in_order_stats.fenced == 0

    # Folding the same chunk again with the warmed key cache gives the same answer.
    assert folder.fold(0, msgs) == (changes, stats)


# -- fold output applied to the cache ---------------------------------------------------


def test_folded_changes_apply_to_cache(tmp_path: Any) -> None:
    from kafkacoord.storage.cache import ShardId, StateCache

    a, b = oc_key(partition=0), oc_key(partition=1)
    g = encode_key(GroupMetadataKey("g"))
    folder = ChunkFolder(OFFSETS, offsets_policy(1_000))
    with StateCache(tmp_path / "db") as cache:
        store = cache.shard(ShardId(OFFSETS, 0))
        changes, _ = folder.fold(
            0, chunk((a, oc_value(1, ts=100)), (b, oc_value(2, ts=50)), (g, GROUP_VALUE))
        )
        store.apply(changes, next_offset=3, identity="id", now_ms=0)
        assert (store.expires_at(a), store.expires_at(b), store.expires_at(g)) == (
            1_100, 1_050, NO_EXPIRY,
        )  # fmt: skip
        changes, _ = folder.fold(0, chunk((b, None), (a, oc_value(3, ts=500)), start=3))
        store.apply(changes, next_offset=5, identity="id", now_ms=0)
        assert (store.expires_at(a), store.expires_at(b)) == (1_500, None)
        assert dict(store.items()) == {a: oc_value(3, ts=500), g: GROUP_VALUE}


def test_valid_commit_with_negative_explicit_expiry_can_be_applied(tmp_path: Any) -> None:
    from kafkacoord.storage.cache import ShardId, StateCache

    a = oc_key()
    changes, stats = offsets_folder().fold(0, chunk((a, oc_value(1, expire=-2))))
    assert stats.poison == 0
    with StateCache(tmp_path / "db") as cache:
        store = cache.shard(ShardId(OFFSETS, 0))
        store.apply(changes, next_offset=1, identity="id", now_ms=0)
        assert store.get(a) == oc_value(1, expire=-2)


# -- leader-epoch fencing of group shards -------------------------------------------------


def leader(epoch: int, offset: int) -> FakeMessage:
    marker = encode_value(ShardLeaderValue(epoch, 1, "inc", T0))
    return FakeMessage(encode_key(ShardLeaderKey()), marker, offset, epoch_headers(epoch))


def tagged(key: bytes, value: bytes | None, offset: int, epoch: int) -> FakeMessage:
    return FakeMessage(key, value, offset, epoch_headers(epoch))


def test_records_of_a_deposed_leader_after_the_new_marker_are_ignored() -> None:
    folder = offsets_folder()
    messages = [
        leader(3, 0),
        tagged(oc_key(), oc_value(10), 1, 3),  # epoch 3 while it led: kept
        leader(4, 2),
        tagged(oc_key(), oc_value(99), 3, 3),  # zombie of epoch 3: ignored
        tagged(oc_key("h"), None, 4, 3),  # a zombie tombstone too
        tagged(oc_key("h"), oc_value(7), 5, 4),
    ]
    changes, stats = folder.fold(0, messages)
    assert changes[oc_key()].value == oc_value(10)
    assert changes[oc_key("h")].value == oc_value(7)
    assert stats.fenced == 2
    assert folder.fence.epoch == 4


def test_the_fence_carries_across_chunks_and_resumes_from_the_cache() -> None:
    folder = ChunkFolder(OFFSETS, offsets_policy(RETENTION), leader_epoch=5)
    changes, stats = folder.fold(0, [tagged(oc_key(), oc_value(1), 9, 4)])
    assert changes == {} and stats.fenced == 1
    # An older marker does not lower the fence.
    changes, stats = folder.fold(0, [leader(2, 10), tagged(oc_key(), oc_value(2), 11, 2)])
    assert oc_key() not in changes and stats.fenced == 2


def test_untagged_records_are_admitted() -> None:
    folder = ChunkFolder(OFFSETS, offsets_policy(RETENTION), leader_epoch=5)
    changes, _ = folder.fold(0, chunk((oc_key(), oc_value(3))))
    assert changes[oc_key()].value == oc_value(3)


# -- property: the fenced fold == a naive in-order replay with the fence ---------------

META_KEYS = [CONTROLLER, partition_key(0), partition_key(1), NODE_KEY]


@st.composite
def metadata_records(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    key = draw(st.sampled_from([*META_KEYS, None, oc_key()]))
    kind = draw(st.sampled_from(["value", "value", "value", "poison", "tombstone"]))
    if kind == "tombstone":
        return key, None
    if kind == "poison":
        return key, draw(st.sampled_from([b"", b"\x00\x01\xff", partition_value(0, 1)[:-2]]))
    epoch = draw(st.integers(0, 4))
    if key == CONTROLLER:
        return key, controller(epoch)
    if key == NODE_KEY:
        return key, encode_value(NodeValue(1, "inc", 1, False, T0, epoch))
    return key, partition_value(draw(st.integers(0, 1)), epoch, leader=draw(st.integers(1, 3)))


def naive_fenced_fold(
    msgs: list[Any], epoch: int
) -> tuple[dict[bytes, Change], dict[bytes, Any], int]:
    """Decode every record in order with the controller-epoch fence, skipping poison."""
    fence = ControllerEpochFence(epoch)
    state: dict[bytes, Change] = {}
    decoded: dict[bytes, Any] = {}
    allowed = metadata_policy().allowed
    for msg in msgs:
        try:
            key, value = decode_record(msg.key(), msg.value())
        except CodecError:
            continue
        if RecordType(msg.key()[0]) not in allowed:
            continue
        if value is None:
            state[msg.key()] = Change(None)
            decoded.pop(msg.key(), None)
            continue
        if not fence.admit(value):
            continue
        state[msg.key()] = Change(msg.value(), NO_EXPIRY, msg.offset())
        decoded.pop(msg.key(), None)
        decoded[msg.key()] = (key, value)
    return state, decoded, fence.epoch


@settings(max_examples=400, deadline=None)
@given(
    pairs=st.lists(metadata_records(), max_size=40),
    split=st.integers(0, 40),
    start_epoch=st.integers(-1, 3),
)
def test_fenced_fold_equals_naive_replay_across_chunks(
    pairs: list[tuple[bytes | None, bytes | None]], split: int, start_epoch: int
) -> None:
    msgs = chunk(*pairs)
    expected, expected_decoded, expected_epoch = naive_fenced_fold(msgs, start_epoch)
    folder = ChunkFolder(METADATA, metadata_policy(), controller_epoch=start_epoch,
                         keep_decoded=True)  # fmt: skip
    state: dict[bytes, Change] = {}
    for part in (msgs[:split], msgs[split:]):  # the fence and the winners span chunks
        changes, stats = folder.fold(0, part)
        state.update(changes)
        assert stats.tombstones == sum(1 for c in changes.values() if c.value is None)
    assert state == expected
    assert {k: c.offset for k, c in state.items()} == {k: c.offset for k, c in expected.items()}
    assert folder.controller_epoch == expected_epoch
    # The decoded winners, in the log order of each key's last record (replay order).
    assert folder.decoded is not None
    assert list(folder.decoded.items()) == list(expected_decoded.items())
