"""The cause of a group record (GroupMetadataValue v2, ConsumerGroupMetadataValue v2),
evolved both ways: a v1 record reads with the current reader (no cause), and a record
with a cause reads with the v1 reader, which skips it (from the .avsc files on disk)."""

from __future__ import annotations

import dataclasses
import json
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro

import kafkacoord.codecs
from kafkacoord.codecs import RecordType, decode_value
from kafkacoord.codecs.models import (
    ConsumerGroupMetadataValue,
    GroupCause,
    GroupCauseKind,
    GroupMember,
    GroupMetadataValue,
)
from kafkacoord.codecs.records import encode_value, encode_value_as

SCHEMA_DIR = Path(kafkacoord.codecs.__file__).parent / "schemas"


def _schema(name: str) -> Any:
    return fastavro.parse_schema(
        json.loads((SCHEMA_DIR / name).read_text("utf-8")), named_schemas={}
    )


CAUSE = GroupCause(GroupCauseKind.MEMBER_LEFT, member_id="c2-1", client_id="c2",
                   client_host="/127.0.0.1")  # fmt: skip
CLASSIC = GroupMetadataValue(
    "consumer", 5, 1_764_300_131_000,
    (GroupMember("c1-1", "c1", "/127.0.0.1", 300_000, 45_000, b"sub", b"asg"),),
    protocol="range", leader="c1-1", cause=CAUSE,
)  # fmt: skip
CONSUMER = ConsumerGroupMetadataValue(7, CAUSE)


def _read(data: bytes, writer: Any, reader: Any) -> dict[str, Any]:
    buf = BytesIO(data)
    datum: dict[str, Any] = fastavro.schemaless_reader(buf, writer, reader)
    assert buf.tell() == len(data)
    return datum


def test_v2_adds_only_an_optional_cause() -> None:
    for name in ("group_metadata_value", "consumer_group_metadata_value"):
        v1, v2 = _schema(f"{name}.v1.avsc"), _schema(f"{name}.v2.avsc")
        assert [f["name"] for f in v2["fields"]] == [f["name"] for f in v1["fields"]] + ["cause"]
        assert v2["fields"][-1]["default"] is None


def test_v1_records_read_with_the_current_reader_without_a_cause() -> None:
    for rtype, value in ((RecordType.GROUP_METADATA, CLASSIC),
                         (RecordType.CONSUMER_GROUP_METADATA, CONSUMER)):  # fmt: skip
        old = encode_value_as(value, 1)
        assert old[:2] == b"\x00\x01"
        assert decode_value(rtype, old) == dataclasses.replace(value, cause=None)


def test_v2_records_keep_their_cause_and_read_with_the_v1_reader() -> None:
    for rtype, name, value in (
        (RecordType.GROUP_METADATA, "group_metadata_value", CLASSIC),
        (RecordType.CONSUMER_GROUP_METADATA, "consumer_group_metadata_value", CONSUMER),
    ):
        new = encode_value(value)
        assert new[:2] == b"\x00\x02"
        assert decode_value(rtype, new) == value
        old_reader = _read(new[2:], _schema(f"{name}.v2.avsc"), _schema(f"{name}.v1.avsc"))
        assert "cause" not in old_reader
        expected = {k: v for k, v in value.to_avro().items() if k != "cause"}
        assert old_reader == expected
