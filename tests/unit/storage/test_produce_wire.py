"""The hand-encoded Kafka requests of the batch producer, checked against an
independent decoder (aiokafka's record reader) and hand-built responses."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from kafkacoord.storage import produce_wire as wire

IDENTITY = wire.ProducerIdentity(producer_id=4242, epoch=3)


def test_a_record_batch_carries_every_record_its_headers_and_the_producer_state() -> None:
    records = [(b"k1", b"v1"), (b"k2", None), (b"k3", b"v3" * 100)]
    data = wire.record_batch(IDENTITY, 17, records, [("kc.epoch", b"\0\0\0\5")], 1_700_000)

    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, 17)
    assert batch.last_offset_delta == 2
    decoded = list(batch)
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (0, b"k1", b"v1"),
        (1, b"k2", None),
        (2, b"k3", b"v3" * 100),
    ]
    assert all(r.headers == [("kc.epoch", b"\0\0\0\5")] for r in decoded)
    assert all(r.timestamp == 1_700_000 for r in decoded)


def test_a_produce_request_is_acks_all_and_lists_every_partition() -> None:
    one = wire.record_batch(IDENTITY, 0, [(b"a", b"1")], [], 1)
    two = wire.record_batch(IDENTITY, 5, [(b"b", b"2"), (b"c", b"3")], [], 1)
    body = wire.produce_request(30_000, {"offsets": [(0, one), (3, two)]})

    txn_len, acks, timeout, topics = struct.unpack_from(">hhii", body)
    assert (txn_len, acks, timeout, topics) == (-1, -1, 30_000, 1)
    position = 12
    (name_len,) = struct.unpack_from(">h", body, position)
    position += 2
    assert body[position : position + name_len] == b"offsets"
    position += name_len
    (partitions,) = struct.unpack_from(">i", body, position)
    position += 4
    seen = []
    for _ in range(partitions):
        partition, size = struct.unpack_from(">ii", body, position)
        position += 8
        seen.append((partition, DefaultRecordBatch(body[position : position + size]).base_sequence))
        position += size
    assert seen == [(0, 0), (3, 5)]
    assert position == len(body)


def test_frames_carry_size_header_and_correlation() -> None:
    framed = wire.frame(0, 7, 99, b"me", b"BODY")
    (size,) = struct.unpack_from(">i", framed)
    assert size == len(framed) - 4
    assert struct.unpack_from(">hhih", framed, 4) == (0, 7, 99, 2)
    assert framed[14:16] == b"me" and framed.endswith(b"BODY")
    flexible = wire.frame(22, 4, 1, b"me", b"X", flexible=True)
    assert flexible[16:17] == b"\0"  # empty tagged fields after the client id


def produce_response_bytes(correlation: int, outcomes: list[tuple[str, int, int, int]]) -> bytes:
    topics: dict[str, list[tuple[int, int, int]]] = {}
    for topic, partition, error, base in outcomes:
        topics.setdefault(topic, []).append((partition, error, base))
    out = struct.pack(">ii", correlation, len(topics))
    for topic, parts in topics.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(parts))
        for partition, error, base in parts:
            out += struct.pack(">ihqqq", partition, error, base, -1, 0)
    return out + struct.pack(">i", 0)


def test_a_produce_response_gives_each_partition_its_error_and_base_offset() -> None:
    response = produce_response_bytes(7, [("offsets", 0, 0, 120), ("offsets", 3, 6, -1)])
    assert wire.correlation_of(response) == 7
    assert wire.produce_response(response) == {("offsets", 0): (0, 120), ("offsets", 3): (6, -1)}


def test_a_truncated_response_is_a_wire_error_not_a_wrong_answer() -> None:
    response = produce_response_bytes(7, [("offsets", 0, 0, 120)])
    with pytest.raises(wire.WireError):
        wire.produce_response(response[:20])
    with pytest.raises(wire.WireError):
        wire.init_producer_id_response(b"\0\0\0\1\0")


def test_init_producer_id_request_asks_for_a_new_id_and_its_response_decodes() -> None:
    body = wire.init_producer_id_request(60_000)
    assert body[0:1] == b"\0"  # null compact transactional id
    assert struct.unpack_from(">iqh", body, 1) == (60_000, -1, -1)
    assert body[-1:] == b"\0"
    response = struct.pack(">ibihqhb", 5, 0, 0, 0, 77, 2, 0)
    assert wire.init_producer_id_response(response) == (0, wire.ProducerIdentity(77, 2))
