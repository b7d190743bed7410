"""The cause of a decision (PartitionValue v3, NodeValue v3: the decision's id, and a
partition's election rule), evolved both ways: a record written before v3 reads with the
current reader (no cause), and a record with a cause reads with the v2 reader, which skips
it (Avro schema resolution, from the .avsc files on disk)."""

from __future__ import annotations

import dataclasses
import json
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkacoord.codecs
from kafkacoord.codecs import RecordType, decode_record, decode_value
from kafkacoord.codecs.models import (
    Cause,
    DecisionKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
)
from kafkacoord.codecs.records import encode_key, encode_value, encode_value_as

SCHEMA_DIR = Path(kafkacoord.codecs.__file__).parent / "schemas"


def _schema(name: str) -> Any:
    return fastavro.parse_schema(
        json.loads((SCHEMA_DIR / name).read_text("utf-8")), named_schemas={}
    )


PARTITION_V2 = _schema("partition_value.v2.avsc")
PARTITION_V3 = _schema("partition_value.v3.avsc")
NODE_V2 = _schema("node_value.v2.avsc")
NODE_V3 = _schema("node_value.v3.avsc")

EXPIRED = DecisionKey(5, 41)
CAUSE = Cause(EXPIRED, rule="offline")
VALUE = PartitionValue("orders", 7, PartitionState.ONLINE, (3, 1, 2), (1,), 1, 8, 9,
                       1_764_300_131_000, 5, election="offline", cause=CAUSE)  # fmt: skip


def _body(schema: Any, datum: dict[str, Any]) -> bytes:
    out = BytesIO()
    fastavro.schemaless_writer(out, schema, datum)
    return out.getvalue()


def _read(data: bytes, writer: Any, reader: Any) -> dict[str, Any]:
    buf = BytesIO(data)
    datum: dict[str, Any] = fastavro.schemaless_reader(buf, writer, reader)
    assert buf.tell() == len(data)
    return datum


def test_v3_adds_only_an_optional_cause() -> None:
    v2 = [f["name"] for f in PARTITION_V2["fields"]]
    v3 = [f["name"] for f in PARTITION_V3["fields"]]
    assert v3 == [*v2, "cause"]
    [cause] = [f for f in PARTITION_V3["fields"] if f["name"] == "cause"]
    assert cause["default"] is None and cause["type"][0] == "null"
    assert [f["name"] for f in NODE_V3["fields"]] == [f["name"] for f in NODE_V2["fields"]] + [
        "decision"
    ]


def test_a_v2_partition_record_reads_with_the_current_reader_without_a_cause() -> None:
    old = dataclasses.replace(VALUE, cause=None)
    datum = {k: v for k, v in old.to_avro().items() if k != "cause"}
    raw = b"\x00\x02" + _body(PARTITION_V2, datum)
    assert raw == encode_value_as(VALUE, 2)  # the cause cannot be written in v2: dropped
    assert decode_value(RecordType.PARTITION, raw) == old  # the hand-written reader
    assert decode_record(encode_key(PartitionKey("orders", 7)), raw) == (
        PartitionKey("orders", 7), old)  # fmt: skip
    # Avro's own resolution agrees: the cause takes its default.
    assert PartitionValue.from_avro(_read(raw[2:], PARTITION_V2, PARTITION_V3)) == old


def test_a_partition_record_with_a_cause_reads_with_the_v2_reader() -> None:
    raw = encode_value(VALUE)
    assert raw[:2] == b"\x00\x03"
    datum = _read(raw[2:], PARTITION_V3, PARTITION_V2)
    assert "cause" not in datum
    assert PartitionValue.from_avro(datum) == dataclasses.replace(VALUE, cause=None)
    assert decode_value(RecordType.PARTITION, raw) == VALUE


def test_node_records_evolve_both_ways() -> None:
    node = NodeValue(3, "inc", 2, True, 10, 5, rack="r1", roles=("coordinator",),
                     decision=EXPIRED)  # fmt: skip
    raw = encode_value(node)
    assert raw[:2] == b"\x00\x03"
    assert decode_value(RecordType.NODE, raw) == node
    old_reader = _read(raw[2:], NODE_V3, NODE_V2)
    assert NodeValue.from_avro(old_reader) == dataclasses.replace(node, decision=None)
    old = encode_value_as(node, 2)
    assert decode_value(RecordType.NODE, old) == dataclasses.replace(node, decision=None)


ids = st.lists(st.integers(-1, 300), max_size=5).map(tuple)
values = st.builds(
    PartitionValue,
    topic=st.text(max_size=20),
    partition=st.integers(0, 1 << 20),
    state=st.sampled_from(PartitionState),
    replicas=ids,
    isr=ids,
    leader=st.integers(-1, 300),
    leader_epoch=st.integers(0, (1 << 31) - 1),
    partition_epoch=st.integers(0, (1 << 31) - 1),
    updated_ms=st.integers(0, 1 << 62),
    controller_epoch=st.integers(0, 1000),
    reassignment=st.none()
    | st.builds(Reassignment, ids, ids, ids, ids, st.text(max_size=4), st.integers(0, 1 << 62)),
    election=st.text(max_size=10),
    elr=ids,
    last_known_elr=ids,
)


@settings(max_examples=150)
@given(values)
def test_hand_read_v2_bodies_are_what_avro_resolution_reads(value: PartitionValue) -> None:
    raw = encode_value_as(value, 2)
    expected = PartitionValue.from_avro(_read(raw[2:], PARTITION_V2, PARTITION_V3))
    assert expected == value  # the strategy draws no cause
    assert decode_value(RecordType.PARTITION, raw) == expected
    key = PartitionKey(value.topic, value.partition)
    assert decode_record(encode_key(key), raw) == (key, expected)


def test_causes_read_again_are_shared_and_exact() -> None:
    # The reader finds a cause it read before by its bytes: large ids and long rules must
    # still read exactly.
    long_ids = Cause(DecisionKey((1 << 31) - 1, (1 << 63) - 1), rule="r" * 70)
    short = (CAUSE, Cause(EXPIRED), Cause(EXPIRED, rule="x"))
    for cause in (CAUSE, long_ids, CAUSE, long_ids, *short):
        value = dataclasses.replace(VALUE, cause=cause)
        first = decode_value(RecordType.PARTITION, encode_value(value))
        again = decode_value(RecordType.PARTITION, encode_value(value))
        assert first == again == value
        if cause in short:  # one object for every partition that shares it
            assert first.cause is again.cause
