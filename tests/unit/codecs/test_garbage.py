"""Garbage in, CodecError out: never another exception type, never a half-decoded model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import (
    SPECS,
    CodecError,
    RecordType,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    record_type_of,
)
from kafkacoord.codecs.models import (
    AdminOffset,
    AvroModel,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ControllerKey,
    ControllerValue,
    DecisionKey,
    DecisionValue,
    GroupAdminKey,
    GroupAdminValue,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberState,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionRacks,
    PartitionState,
    PartitionValue,
    Reassignment,
    RebalanceKey,
    RebalanceMove,
    RebalanceState,
    RebalanceValue,
    ShardLeaderKey,
    ShardLeaderValue,
    SubscribedTopic,
    TopicKey,
    TopicPartitions,
    TopicValue,
    Trigger,
    TriggerKind,
)

T0 = 1_700_000_000_000

# One realistic record per type (the PARTITION and GROUP_METADATA ones with nested data).
SAMPLES: dict[RecordType, tuple[AvroModel, AvroModel]] = {
    RecordType.CONTROLLER: (ControllerKey(), ControllerValue(5, 1, "inc-1", T0, "10.1.2.3:9192")),
    RecordType.NODE: (
        NodeKey(1),
        NodeValue(1, "inc", 3, False, T0, 5, "rack-1", {"PLAINTEXT": "host:9092"}),
    ),
    RecordType.TOPIC: (
        TopicKey("orders"),
        TopicValue("orders", "id-1", 3, 3, T0, 5, {"cleanup.policy": "compact"}),
    ),
    RecordType.PARTITION: (
        PartitionKey("orders", 0),
        PartitionValue(
            "orders",
            0,
            PartitionState.ONLINE,
            (1, 2, 3),
            (1, 2),
            1,
            4,
            7,
            T0,
            5,
            Reassignment((1, 2, 3), (2, 3, 4), (4,), (1,), "ADDING", T0),
        ),
    ),
    RecordType.GROUP_METADATA: (
        GroupMetadataKey("group-1"),
        GroupMetadataValue(
            "consumer",
            3,
            T0,
            (
                GroupMember("m1", "c1", "/10.0.0.1", 30_000, 10_000, b"sub", b"asg"),
                GroupMember("m2", "c2", "/10.0.0.2", 30_000, 10_000, b"", b"", "static"),
            ),
            "range",
            "m1",
        ),
    ),
    RecordType.OFFSET_COMMIT: (
        OffsetCommitKey("group-1", "orders", 0),
        OffsetCommitValue(42, "meta", T0, 3, None),
    ),
    RecordType.SHARD_LEADER: (ShardLeaderKey(), ShardLeaderValue(4, 2, "inc-2", T0)),
    RecordType.GROUP_ADMIN: (
        GroupAdminKey("g", "admin-1:7"),
        GroupAdminValue(
            "offsets_reset", T0, "admin-1", "CN=alice", (AdminOffset("orders", 0, 120, 0),)
        ),
    ),
    RecordType.CONSUMER_GROUP_METADATA: (
        ConsumerGroupMetadataKey("g"),
        ConsumerGroupMetadataValue(3),
    ),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: (
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue(
            (SubscribedTopic("orders", 3, (PartitionRacks(0, ("a", "b")),)),)
        ),
    ),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: (
        ConsumerGroupMemberMetadataKey("g", "m1"),
        ConsumerGroupMemberMetadataValue("c1", "/10.0.0.1", ("orders",), 30_000, "i1", "a"),
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        ConsumerGroupTargetAssignmentMetadataValue(3),
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        ConsumerGroupTargetAssignmentMemberKey("g", "m1"),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions("orders", (0, 1)),)),
    ),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m1"),
        ConsumerGroupCurrentMemberAssignmentValue(
            3,
            2,
            MemberState.UNREVOKED_PARTITIONS,
            (TopicPartitions("orders", (0,)),),
            (TopicPartitions("orders", (1,)),),
        ),
    ),
    RecordType.DECISION: (
        DecisionKey(7, 12),
        DecisionValue(Trigger(TriggerKind.SESSION_EXPIRED, node_id=3, heartbeat_ms=T0), T0, 7),
    ),
    RecordType.REBALANCE: (
        RebalanceKey(),
        RebalanceValue(
            "p1",
            RebalanceState.RUNNING,
            ("rack",),
            (3,),
            (RebalanceMove("orders", 0, (1, 3), (2, 4)),),
            5,
            100,
            1000,
            T0,
            T0,
            2,
        ),
    ),
}
ENCODED: dict[RecordType, tuple[bytes, bytes]] = {
    t: (encode_key(k), encode_value(v)) for t, (k, v) in SAMPLES.items()
}
KNOWN_TAGS = {int(t) for t in RecordType}


def test_samples_cover_every_type_and_are_valid() -> None:
    assert set(SAMPLES) == set(SPECS)
    for rtype, (key, value) in SAMPLES.items():
        assert decode_record(*ENCODED[rtype]) == (key, value)


def test_codec_error_is_a_value_error_naming_its_part() -> None:
    assert issubclass(CodecError, ValueError)
    err = CodecError("boom", part="value", cause=EOFError("eof"))
    assert isinstance(err, ValueError)
    assert err.part == "value"
    assert str(err) == "value: boom (EOFError: eof)"
    assert str(CodecError("x")) == "record: x"


# -- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [b"", None], ids=["empty", "none"])
def test_missing_key(key: bytes | None) -> None:
    with pytest.raises(CodecError, match=r"^key: empty key") as info:
        decode_record(key, ENCODED[RecordType.OFFSET_COMMIT][1])
    assert info.value.part == "key"
    with pytest.raises(CodecError, match=r"^key: "):
        record_type_of(key)
    with pytest.raises(CodecError, match=r"^key: "):
        decode_key(key)


def test_every_unknown_type_tag() -> None:
    unknown = [tag for tag in range(256) if tag not in KNOWN_TAGS]
    assert len(unknown) == 256 - len(RecordType)
    for tag in unknown:
        raw = bytes((tag, 1)) + ENCODED[RecordType.OFFSET_COMMIT][0][2:]
        with pytest.raises(CodecError, match=rf"^key: unknown record type tag {tag}$"):
            decode_record(raw, None)


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_every_truncated_key(rtype: RecordType) -> None:
    raw_key, raw_value = ENCODED[rtype]
    assert len(raw_key) >= 2
    for cut in range(len(raw_key)):
        with pytest.raises(CodecError, match=r"^key: "):
            decode_record(raw_key[:cut], raw_value)


def test_one_byte_key_with_valid_tag() -> None:
    with pytest.raises(CodecError, match=r"^key: key shorter than its 2-byte header"):
        decode_key(bytes((RecordType.NODE,)))


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_trailing_bytes_after_key(rtype: RecordType) -> None:
    raw_key, _ = ENCODED[rtype]
    with pytest.raises(CodecError, match=r"^key: 1 trailing bytes after the Avro body"):
        decode_key(raw_key + b"\x00")
    with pytest.raises(CodecError, match=r"^key: 3 trailing bytes"):
        decode_key(raw_key + b"abc")


# -- values ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [b"", b"\x00", b"\x01"], ids=["empty", "zero", "one"])
@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_value_shorter_than_header(rtype: RecordType, value: bytes) -> None:
    raw_key, _ = ENCODED[rtype]
    with pytest.raises(CodecError, match=r"^value: value shorter than its 2-byte header") as info:
        decode_record(raw_key, value)
    assert info.value.part == "value"


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_every_truncated_value(rtype: RecordType) -> None:
    # Avro binary is prefix-free for a fixed schema, so no strict prefix is a valid body.
    raw_key, raw_value = ENCODED[rtype]
    for cut in range(len(raw_value)):
        with pytest.raises(CodecError, match=r"^value: "):
            decode_record(raw_key, raw_value[:cut])


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_trailing_bytes_after_value(rtype: RecordType) -> None:
    raw_key, raw_value = ENCODED[rtype]
    with pytest.raises(CodecError, match=r"^value: 1 trailing bytes after the Avro body"):
        decode_record(raw_key, raw_value + b"\x00")


# Same field types in the same order (int and long are both varints): Avro cannot tell
# these bodies apart. That is why every value is decoded under the key's type tag.
SAME_SHAPE = {
    frozenset({RecordType.CONTROLLER, RecordType.SHARD_LEADER}),
    # ControllerValue v2 (int, int, string, long, [null, string]) reads an offset commit.
    frozenset({RecordType.CONTROLLER, RecordType.OFFSET_COMMIT}),
    # A group epoch and a target assignment epoch: one int each, as in Kafka.
    frozenset(
        {RecordType.CONSUMER_GROUP_METADATA, RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA}
    ),
}


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        (w, r)
        for w in sorted(SPECS)
        for r in sorted(SPECS)
        if w != r and frozenset({w, r}) not in SAME_SHAPE
    ],
    ids=lambda t: t.name,
)
def test_value_of_another_record_type(writer: RecordType, reader: RecordType) -> None:
    # Avro is not self-describing, so a foreign body is only caught when it does not fit
    # the schema; for these realistic samples of differently shaped records it never does.
    raw_key = ENCODED[reader][0]
    foreign = ENCODED[writer][1]
    with pytest.raises(CodecError, match=r"^value: "):
        decode_record(raw_key, foreign)


# -- fuzz ------------------------------------------------------------------------------


def _decode_or_codec_error(key: bytes | None, value: bytes | None) -> None:
    try:
        decoded_key, decoded_value = decode_record(key, value)
    except Exception as exc:
        assert isinstance(exc, CodecError), f"{type(exc).__name__}: {exc}"
        assert exc.part in {"key", "value"}
        assert str(exc).startswith(f"{exc.part}: ")
        return
    # Success: the models must be the ones the type tag announces, fully formed.
    assert key
    spec = SPECS[RecordType(key[0])]
    assert type(decoded_key) is spec.key_cls
    if value is None:
        assert decoded_value is None
    else:
        assert type(decoded_value) is spec.value_cls


FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
raw_keys = st.one_of(
    st.none(),
    st.binary(max_size=48),
    # A known tag and version, so the fuzzer reaches the Avro body.
    st.builds(
        lambda t, body: bytes((t, 1)) + body,
        st.sampled_from(sorted(KNOWN_TAGS)),
        st.binary(max_size=48),
    ),
)
raw_values = st.one_of(
    st.none(),
    st.binary(max_size=96),
    st.builds(
        lambda v, body: bytes((0, v)) + body, st.sampled_from([1, 2]), st.binary(max_size=96)
    ),
)


@FUZZ
@given(key=raw_keys, value=raw_values)
def test_fuzz_arbitrary_bytes(key: bytes | None, value: bytes | None) -> None:
    _decode_or_codec_error(key, value)


@st.composite
def _mutated(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and out:
            out[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            out[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and out:
            del out[pos]
        elif op == "truncate":
            del out[pos:]
    return bytes(out)


@FUZZ
@given(
    data=st.data(),
    rtype=st.sampled_from(sorted(SPECS)),
    which=st.sampled_from(["key", "value", "both"]),
)
def test_fuzz_mutated_valid_records(data: st.DataObject, rtype: RecordType, which: str) -> None:
    raw_key, raw_value = ENCODED[rtype]
    key = data.draw(_mutated(raw_key)) if which in {"key", "both"} else raw_key
    value = data.draw(_mutated(raw_value)) if which in {"value", "both"} else raw_value
    _decode_or_codec_error(key, value)


@FUZZ
@given(rtype=st.sampled_from(sorted(SPECS)), value=st.binary(max_size=64))
def test_fuzz_decode_value_directly(rtype: RecordType, value: bytes) -> None:
    try:
        decoded = decode_value(rtype, value)
    except Exception as exc:
        assert isinstance(exc, CodecError), f"{type(exc).__name__}: {exc}"
        assert exc.part == "value"
    else:
        assert type(decoded) is SPECS[rtype].value_cls
