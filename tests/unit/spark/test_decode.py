"""The source's fast decoding agrees with kafkacoord.codecs, poison included."""

from __future__ import annotations

import pytest

from kafkacoord.codecs import CodecError, RecordType, decode_key, decode_value, encode_key
from kafkacoord.codecs import encode_value as encode
from kafkacoord.codecs.models import (
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
    Reassignment,
    TopicKey,
    TopicValue,
)
from kafkacoord.codecs.records import encode_value_as
from kafkacoord.spark.source.decode import PoisonError, RecordDecoder

RECORDS = [
    (ControllerKey(), ControllerValue(3, 1, "inc", 99)),
    (NodeKey(2), NodeValue(2, "inc", 5, False, 10, 3, rack="r1", endpoints={"a": "b"})),
    (TopicKey("orders"), TopicValue("orders", "id", 3, 2, 10, 3, {"k": "v"}, deleting=True)),
    (
        PartitionKey("orders", 1),
        PartitionValue(
            "orders", 1, PartitionState.ONLINE, (1, 2, 3), (1, 2), 1, 4, 7, 100, 3,
            Reassignment((1, 2, 3), (4, 5, 6), (4, 5, 6), (1, 2, 3), "A2", 50), "reassign",
        ),
    ),
    (
        GroupMetadataKey("g"),
        GroupMetadataValue(
            "consumer", 4, 77, (GroupMember("m", "c", "/h", 1, 2, b"s", b"a", "i"),), "range", "m"
        ),
    ),
    (OffsetCommitKey("g", "orders", 2), OffsetCommitValue(42, "meta", 1234, 7, None)),
]  # fmt: skip

ALL = frozenset(RecordType)


@pytest.mark.parametrize(("key", "value"), RECORDS, ids=lambda r: type(r).__name__)
def test_fast_path_equals_the_codecs(key: object, value: object) -> None:
    decoder = RecordDecoder(ALL)
    raw_key, raw_value = encode_key(key), encode(value)  # type: ignore[arg-type]
    rtype, fields = decoder.key(raw_key)
    assert fields == decode_key(raw_key).to_avro()
    assert decoder.value(rtype, raw_value) == decode_value(rtype, raw_value).to_avro()


def test_older_value_versions_resolve_like_the_codecs() -> None:
    decoder = RecordDecoder(ALL)
    old = encode_value_as(OffsetCommitValue(42, "m", 1234), 1)
    assert (
        decoder.value(RecordType.OFFSET_COMMIT, old)
        == decode_value(RecordType.OFFSET_COMMIT, old).to_avro()
    )
    assert decoder.value(RecordType.OFFSET_COMMIT, old)["leader_epoch"] == -1


@pytest.mark.parametrize(
    "raw_key",
    [None, b"", b"\x63\x01garbage", encode_key(OffsetCommitKey("g", "t", 1))[:3], b"\x0b\x09zz"],
)
def test_bad_keys_are_poison_with_the_codecs_reason(raw_key: bytes | None) -> None:
    decoder = RecordDecoder(ALL)
    with pytest.raises(PoisonError) as caught:
        decoder.key(raw_key)
    if raw_key is not None:
        with pytest.raises(CodecError) as expected:
            decode_key(raw_key)
        assert caught.value.reason == str(expected.value)
    # Remembered: the second look-up gives the same answer.
    with pytest.raises(PoisonError):
        decoder.key(raw_key)


def test_bad_values_are_poison_and_foreign_types_are_refused() -> None:
    decoder = RecordDecoder(frozenset({RecordType.OFFSET_COMMIT}))
    good = encode(OffsetCommitValue(1, "m", 2))
    for bad in (good[:-2], b"\x00\x63" + good[2:], good + b"\x00", b"\x00"):
        with pytest.raises(PoisonError):
            decoder.value(RecordType.OFFSET_COMMIT, bad)
    with pytest.raises(PoisonError, match="does not belong"):
        decoder.key(encode_key(NodeKey(1)))
