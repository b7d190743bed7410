"""Schema evolution: values written with an older schema decode with the newest reader."""

from __future__ import annotations

import json
import struct
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkacoord.codecs
from kafkacoord.codecs import CodecError, RecordType, decode_key, decode_record, decode_value
from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.codecs.records import SPECS, encode_key, encode_value, encode_value_as

SCHEMA_DIR = Path(kafkacoord.codecs.__file__).parent / "schemas"
LONGS = st.integers(-(2**63), 2**63 - 1)


def _schema_from_file(name: str) -> Any:
    """Parse an .avsc straight from disk, independently of kafkacoord.codecs.schemas."""
    return fastavro.parse_schema(
        json.loads((SCHEMA_DIR / name).read_text("utf-8")), named_schemas={}
    )


V1 = _schema_from_file("offset_commit_value.v1.avsc")
V2 = _schema_from_file("offset_commit_value.v2.avsc")


def _hand_encode(schema: Any, version: int, datum: dict[str, Any]) -> bytes:
    out = BytesIO()
    out.write(struct.pack(">H", version))
    fastavro.schemaless_writer(out, schema, datum)
    return out.getvalue()


def test_schema_files_are_the_ones_the_codec_uses() -> None:
    spec = SPECS[RecordType.OFFSET_COMMIT]
    assert sorted(spec.value_versions) == [1, 2]
    v1_fields = [f["name"] for f in V1["fields"]]
    v2_fields = [f["name"] for f in V2["fields"]]
    assert "leader_epoch" not in v1_fields
    assert "leader_epoch" in v2_fields
    assert set(v2_fields) - set(v1_fields) == {"leader_epoch"}


def test_encode_value_as_v1_decodes_with_default_leader_epoch() -> None:
    value = OffsetCommitValue(
        offset=1234,
        metadata="meta-ü",
        commit_timestamp_ms=1_700_000_000_000,
        leader_epoch=17,  # not representable in v1: must be dropped, then defaulted
        expire_timestamp_ms=1_700_000_600_000,
    )
    raw = encode_value_as(value, 1)
    assert raw[:2] == b"\x00\x01"
    assert raw != encode_value(value)

    decoded = decode_value(RecordType.OFFSET_COMMIT, raw)
    assert decoded == OffsetCommitValue(
        offset=1234,
        metadata="meta-ü",
        commit_timestamp_ms=1_700_000_000_000,
        leader_epoch=-1,
        expire_timestamp_ms=1_700_000_600_000,
    )


def test_encode_value_as_current_version_equals_encode_value() -> None:
    value = OffsetCommitValue(5, "m", 10, leader_epoch=3, expire_timestamp_ms=None)
    assert encode_value_as(value, 2) == encode_value(value)


@settings(max_examples=150)
@given(
    offset=LONGS,
    metadata=st.text(max_size=30),
    commit=LONGS,
    expire=st.none() | LONGS,
)
def test_hand_built_v1_bytes_decode_with_v2_reader(
    offset: int, metadata: str, commit: int, expire: int | None
) -> None:
    datum = {
        "offset": offset,
        "metadata": metadata,
        "commit_timestamp_ms": commit,
        "expire_timestamp_ms": expire,
    }
    raw_v1 = _hand_encode(V1, 1, datum)
    # Independent of encode_value_as: the same bytes either way.
    assert raw_v1 == encode_value_as(OffsetCommitValue(offset, metadata, commit, 99, expire), 1)

    key = encode_key(OffsetCommitKey("group", "topic", 3))
    decoded_key, decoded = decode_record(key, raw_v1)
    assert decoded_key == OffsetCommitKey("group", "topic", 3)
    assert isinstance(decoded, OffsetCommitValue)
    assert decoded.leader_epoch == -1
    assert decoded.offset == offset
    assert decoded.metadata == metadata
    assert decoded.commit_timestamp_ms == commit
    assert decoded.expire_timestamp_ms == expire


def test_hand_built_v2_bytes_decode_exactly() -> None:
    datum = {
        "offset": 9,
        "leader_epoch": 4,
        "metadata": "x",
        "commit_timestamp_ms": 100,
        "expire_timestamp_ms": None,
    }
    raw = _hand_encode(V2, 2, datum)
    assert raw == encode_value(OffsetCommitValue(9, "x", 100, 4, None))
    assert decode_value(RecordType.OFFSET_COMMIT, raw) == OffsetCommitValue(9, "x", 100, 4, None)


def test_version_header_selects_the_writer_schema() -> None:
    # v1 bytes relabelled as v2 are read with the wrong writer schema: the codec trusts the
    # header, so the body no longer fits (here: leader_epoch swallows the metadata length).
    raw_v1 = _hand_encode(
        V1,
        1,
        {
            "offset": 1,
            "metadata": "abcdefgh",
            "commit_timestamp_ms": 1_700_000_000_000,
            "expire_timestamp_ms": None,
        },
    )
    relabelled = b"\x00\x02" + raw_v1[2:]
    with pytest.raises(CodecError, match=r"^value: "):
        decode_value(RecordType.OFFSET_COMMIT, relabelled)


@pytest.mark.parametrize("version", [0, 3, 99, 0xFFFF])
def test_unknown_value_version_is_rejected(version: int) -> None:
    body = encode_value(OffsetCommitValue(1, "m", 2))[2:]
    raw = struct.pack(">H", version) + body
    with pytest.raises(
        CodecError, match=rf"^value: unsupported value version {version} for OFFSET_COMMIT"
    ):
        decode_value(RecordType.OFFSET_COMMIT, raw)
    key = encode_key(OffsetCommitKey("g", "t", 0))
    with pytest.raises(CodecError, match="unsupported value version"):
        decode_record(key, raw)


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_unknown_value_version_for_every_type(rtype: RecordType) -> None:
    with pytest.raises(CodecError, match=rf"unsupported value version 99 for {rtype.name}"):
        decode_value(rtype, b"\x00\x63" + b"\x00" * 16)


@pytest.mark.parametrize("version", [0, 2, 99, 255])
def test_unknown_key_version_is_rejected(version: int) -> None:
    valid = encode_key(OffsetCommitKey("g", "t", 0))
    raw = bytes((valid[0], version)) + valid[2:]
    with pytest.raises(
        CodecError, match=rf"^key: unsupported key version {version} for OFFSET_COMMIT"
    ):
        decode_key(raw)
    with pytest.raises(CodecError, match="unsupported key version"):
        decode_record(raw, None)
