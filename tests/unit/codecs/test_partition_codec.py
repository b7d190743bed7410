"""The hand-written partition codec's Avro primitives on what fastavro never writes, and
on bad values (its byte-for-byte match with fastavro is in test_roundtrip.py)."""

from __future__ import annotations

import pytest

from kafkacoord.codecs import (
    CodecError,
    RecordType,
    avro_binary,
    decode_record,
    decode_value,
)
from kafkacoord.codecs.models import PartitionKey, PartitionState, PartitionValue
from kafkacoord.codecs.records import encode_key, encode_value


def test_arrays_in_several_blocks_and_sized_blocks_are_read() -> None:
    # Writers may split an array: [1, 2] then [300], and a block may give its byte size
    # (negative count). fastavro itself writes one block; Java's writer may not.
    w = avro_binary.write_long
    several = w(2) + w(1) + w(2) + w(1) + w(300) + w(0)
    sized = w(-2) + w(len(w(1) + w(2))) + w(1) + w(2) + w(0)
    assert avro_binary.read_int_array(several, 0) == ((1, 2, 300), len(several))
    assert avro_binary.read_int_array(sized, 0) == ((1, 2), len(sized))


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 11,  # a varint that never ends
        avro_binary.write_long(1 << 40),  # a long where an int belongs
        b"\x06\x02\x04",  # three items promised, two given, no end
        b"\x7e" + b"\x02" * 10,  # 63 items promised, 10 given
    ],
)
def test_malformed_int_arrays_raise(data: bytes) -> None:
    with pytest.raises((ValueError, IndexError)):
        avro_binary.read_int_array(data, 0)


def test_out_of_range_fields_are_codec_errors_not_garbage_bytes() -> None:
    good = PartitionValue("t", 0, PartitionState.ONLINE, (1,), (1,), 1, 0, 0, 0, 0)
    for bad in (
        PartitionValue("t", 1 << 31, PartitionState.ONLINE, (1,), (1,), 1, 0, 0, 0, 0),
        PartitionValue("t", 0, PartitionState.ONLINE, (1 << 40,), (1,), 1, 0, 0, 0, 0),
    ):
        with pytest.raises(CodecError):
            encode_value(bad)
    encoded = bytearray(encode_value(good))
    encoded[5] = 0x08  # the state enum's index: 4 is past OFFLINE
    with pytest.raises(CodecError, match="does not match its schema"):
        decode_value(RecordType.PARTITION, bytes(encoded))


def _value(topic: str, partition: int, updated_ms: int = 0) -> PartitionValue:
    return PartitionValue(topic, partition, PartitionState.ONLINE, (1, 2), (1,), 1, 0, 0,
                          updated_ms, 0)  # fmt: skip


def test_a_record_whose_key_disagrees_with_its_value_keeps_its_own_key() -> None:
    # The pair path builds the key from the value; a key that is not the value's first
    # two fields is decoded on its own (and a malformed one is an error, not the value's).
    value = encode_value(_value("t", 2))
    assert decode_record(encode_key(PartitionKey("t", 1)), value) == (
        PartitionKey("t", 1), _value("t", 2))  # fmt: skip
    assert decode_record(encode_key(PartitionKey("u", 2)), value)[0] == PartitionKey("u", 2)
    with pytest.raises(CodecError, match="trailing"):
        decode_record(encode_key(PartitionKey("t", 2)) + b"\x00", value)
    with pytest.raises(CodecError):  # the value is garbage: no key from it
        decode_record(encode_key(PartitionKey("t", 2)), value[:9])


def test_timestamps_read_back_whatever_came_before() -> None:
    # The reader remembers the last timestamp's bytes; lengths and values alternate here.
    times = [0, 1, 1764100000000, 1764100000000, 63, 64, -1, 1 << 62, 1764100000001, 0]
    for ms in times:
        assert decode_value(RecordType.PARTITION, encode_value(_value("t", 0, ms))).updated_ms == ms
