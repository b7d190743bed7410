"""The hand-written partition codec's Avro primitives on what fastavro never writes, and
on bad values (its byte-for-byte match with fastavro is in test_roundtrip.py)."""

from __future__ import annotations

import pytest

from kafkacoord.codecs import (
    CodecError,
    RecordType,
    avro_binary,
    decode_value,
)
from kafkacoord.codecs.models import PartitionState, PartitionValue
from kafkacoord.codecs.records import encode_value


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
