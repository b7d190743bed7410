"""The hand-written partition codec writes and reads exactly what fastavro does."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import (
    CodecError,
    RecordType,
    avro_binary,
    decode_key,
    decode_value,
    encode_key,
    partition_codec,
    schemas,
)
from kafkacoord.codecs.models import PartitionKey, PartitionState, PartitionValue, Reassignment
from kafkacoord.codecs.records import encode_value

INT = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
LONG = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
# Small ids dominate, but every width and sign must survive.
REPLICA = st.one_of(st.integers(min_value=-1, max_value=200), INT)
REPLICAS = st.lists(REPLICA, max_size=70).map(tuple)
TEXT = st.text(max_size=40)

REASSIGNMENTS = st.builds(
    Reassignment, REPLICAS, REPLICAS, REPLICAS, REPLICAS, TEXT, LONG
)  # fmt: skip
VALUES = st.builds(
    PartitionValue,
    topic=TEXT,
    partition=INT,
    state=st.sampled_from(PartitionState),
    replicas=REPLICAS,
    isr=REPLICAS,
    leader=REPLICA,
    leader_epoch=INT,
    partition_epoch=INT,
    updated_ms=LONG,
    controller_epoch=INT,
    reassignment=st.none() | REASSIGNMENTS,
    election=TEXT,
    elr=REPLICAS,
    last_known_elr=REPLICAS,
)


def _fastavro(name: str, version: int, datum: dict[str, Any]) -> bytes:
    out = BytesIO()
    fastavro.schemaless_writer(out, schemas.parsed(name, version), datum)
    return out.getvalue()


@settings(max_examples=400)
@given(VALUES)
def test_value_bytes_match_fastavro_and_read_back(value: PartitionValue) -> None:
    body = _fastavro("partition_value", partition_codec.VALUE_VERSION, value.to_avro())
    assert partition_codec.encode_value_body(value) == body
    encoded = encode_value(value)
    assert encoded[2:] == body
    assert decode_value(RecordType.PARTITION, encoded) == value


@settings(max_examples=200)
@given(TEXT, INT)
def test_key_bytes_match_fastavro_and_read_back(topic: str, partition: int) -> None:
    key = PartitionKey(topic, partition)
    body = _fastavro("partition_key", partition_codec.KEY_VERSION, key.to_avro())
    assert partition_codec.encode_key_body(key) == body
    assert decode_key(encode_key(key)) == key


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
