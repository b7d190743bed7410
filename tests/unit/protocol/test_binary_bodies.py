"""OffsetCommit's and Heartbeat's binary bodies (api version 1) against JSON (version 0).

Every commit a JSON body can carry, the binary one carries to the same fields; every
value the JSON path refuses as beyond its bound, the binary path refuses with the same
code, and the connection serves on for both; whatever bytes come, the decoder answers
with a value or a :class:`RequestBodyError`, never another exception.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.coordinator.protocol import (
    GROUP_APIS,
    Empty,
    ErrorCode,
    RequestBodyError,
    decode_request,
    encode_body,
)
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.binary import (
    decode_body,
    decode_reply_body,
    encode_reply_body,
    encode_request_body,
)
from kafkacoord.coordinator.protocol.binary_commit import (
    BinaryHeartbeat,
    BinaryOffsetCommit,
    decode_heartbeat,
    decode_offset_commit,
    decode_offset_commit_response,
    encode_offset_commit,
    encode_offset_commit_response,
)
from kafkacoord.coordinator.protocol.types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    LIST_MAX,
    RETENTION_MS_MAX,
)

SPEC = GROUP_APIS["OffsetCommit"]
# Kafka STRINGs hold 32,767 UTF-8 bytes; short ones with any code point but surrogates.
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


def fields(body: g.OffsetCommit | BinaryOffsetCommit) -> tuple[object, ...]:
    return (
        body.group_id, body.generation_id, body.member_id, body.group_instance_id,
        body.retention_time_ms, body.reset,
        [(t.name, [(p.partition, p.offset, p.leader_epoch, p.metadata) for p in t.partitions])
         for t in body.topics],
    )  # fmt: skip


partitions = st.builds(
    g.CommitPartition,
    partition=st.integers(0, INT32_MAX),
    offset=st.integers(INT64_MIN, INT64_MAX),
    leader_epoch=st.integers(INT32_MIN, INT32_MAX),
    metadata=st.none() | texts,
)
commits = st.builds(
    g.OffsetCommit,
    group_id=texts,
    generation_id=st.integers(INT32_MIN, INT32_MAX),
    member_id=texts,
    group_instance_id=st.none() | texts,
    retention_time_ms=st.integers(INT64_MIN, RETENTION_MS_MAX),
    topics=st.lists(
        st.builds(g.CommitTopic, name=texts, partitions=st.lists(partitions, max_size=4)),
        max_size=3,
    ),
    reset=st.booleans(),
)


@settings(max_examples=300)
@given(commits)
def test_a_binary_body_carries_what_the_json_one_does(body: g.OffsetCommit) -> None:
    decoded = decode_offset_commit(encode_offset_commit(body))
    from_json = decode_request(SPEC, encode_body(body))
    assert fields(decoded) == fields(body) == fields(from_json)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(commits, st.data())
def test_a_cut_body_is_malformed(body: g.OffsetCommit, data: st.DataObject) -> None:
    encoded = encode_offset_commit(body)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(RequestBodyError) as refused:
        decode_offset_commit(encoded[:cut])
    assert refused.value.malformed
    assert refused.value.code is ErrorCode.INVALID_REQUEST


def test_bytes_after_the_body_are_malformed() -> None:
    body = g.OffsetCommit(group_id="g", topics=[])
    with pytest.raises(RequestBodyError, match="1 bytes after the body") as refused:
        decode_offset_commit(encode_offset_commit(body) + b"\x00")
    assert refused.value.malformed


@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_any_bytes_decode_or_are_refused(data: bytes) -> None:
    try:
        decoded = decode_offset_commit(data)
    except RequestBodyError as exc:
        assert exc.code is ErrorCode.INVALID_REQUEST
        return
    # What decodes encodes back to the same bytes: nothing was read loosely.
    assert encode_offset_commit(decoded) == data


def _raw(*, partition: int = 0, retention: int = -1, count: int = 1, reset: int = 0) -> bytes:
    """A commit of group "g" with one topic "t", built by hand to hold what no model can."""
    return (
        struct.pack(">h", 1) + b"g" + struct.pack(">iq", -1, retention) + struct.pack(">h", 0)
        + struct.pack(">h", -1) + bytes([reset]) + struct.pack(">i", 1)
        + struct.pack(">h", 1) + b"t" + struct.pack(">i", count)
        + struct.pack(">iqi", partition, 5, -1) + struct.pack(">h", -1)
    )  # fmt: skip


def _json(*, partition: int = 0, retention: int = -1) -> bytes:
    return (
        b'{"group_id":"g","retention_time_ms":%d,"topics":[{"name":"t","partitions":'
        b'[{"partition":%d,"offset":5}]}]}' % (retention, partition)
    )


@pytest.mark.parametrize(
    ("binary", "json"),
    [
        (_raw(partition=-1), _json(partition=-1)),
        (_raw(retention=RETENTION_MS_MAX + 1), _json(retention=RETENTION_MS_MAX + 1)),
        (_raw(retention=INT64_MAX), _json(retention=INT64_MAX)),
    ],
    ids=["negative partition", "retention past the bound", "retention int64 max"],
)
def test_values_beyond_their_bound_are_refused_alike(binary: bytes, json: bytes) -> None:
    with pytest.raises(RequestBodyError) as from_binary:
        decode_offset_commit(binary)
    with pytest.raises(RequestBodyError) as from_json:
        decode_request(SPEC, json)
    assert not from_binary.value.malformed and not from_json.value.malformed
    assert from_binary.value.code is from_json.value.code is ErrorCode.INVALID_REQUEST


def test_a_count_past_the_list_bound_is_refused_and_one_past_the_body_is_malformed() -> None:
    with pytest.raises(RequestBodyError) as beyond:
        decode_offset_commit(_raw(count=LIST_MAX + 1))
    assert not beyond.value.malformed
    assert f"at most {LIST_MAX}" in beyond.value.message
    # A count the body cannot hold is refused before any item is read or allocated.
    with pytest.raises(RequestBodyError) as short:
        decode_offset_commit(_raw(count=1000))
    assert short.value.malformed


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda b: b"\xff\xfe" + b[2:], "string length -2"),  # group_id's length
        (lambda b: b.replace(b"\x01g", b"\x01\xff"), "not UTF-8"),
        (lambda b: b"\xff\xff" + b[2:], "null where a string is required"),
    ],
)
def test_broken_strings_are_malformed(mangle: object, reason: str) -> None:
    assert callable(mangle)
    with pytest.raises(RequestBodyError, match=reason) as refused:
        decode_offset_commit(mangle(_raw()))
    assert refused.value.malformed


def test_a_boolean_byte_other_than_0_or_1_is_malformed() -> None:
    assert decode_offset_commit(_raw(reset=1)).reset is True
    with pytest.raises(RequestBodyError, match="boolean byte 2") as refused:
        decode_offset_commit(_raw(reset=2))
    assert refused.value.malformed


def test_a_string_past_kafkas_bound_cannot_be_encoded() -> None:
    body = g.OffsetCommit(group_id="g", member_id="é" * 20_000, topics=[])
    with pytest.raises(ValueError, match="does not fit a Kafka STRING"):
        encode_offset_commit(body)


partition_errors = st.builds(
    g.PartitionError, partition=st.integers(0, INT32_MAX), error=st.sampled_from(ErrorCode)
)
topic_errors = st.builds(
    g.TopicErrors, name=texts, partitions=st.lists(partition_errors, max_size=4)
)


@settings(max_examples=200)
@given(st.lists(topic_errors, max_size=3))
def test_a_response_round_trips(topics: list[g.TopicErrors]) -> None:
    response = g.OffsetCommitResponse(topics=topics)
    assert decode_offset_commit_response(encode_offset_commit_response(response)) == response


def test_a_response_decoded_again_is_the_same_frozen_instance() -> None:
    response = g.OffsetCommitResponse(
        topics=[g.TopicErrors(name="t", partitions=[g.PartitionError(partition=9)])]
    )
    data = encode_offset_commit_response(response)
    first = decode_offset_commit_response(data)
    assert first == response and decode_offset_commit_response(bytes(data)) is first
    # Bounded: past its entries it starts over, and still decodes right.
    for p in range(1100):
        one = g.OffsetCommitResponse(
            topics=[g.TopicErrors(name="u", partitions=[g.PartitionError(partition=p)])]
        )
        assert decode_offset_commit_response(encode_offset_commit_response(one)) == one
    again = decode_offset_commit_response(data)
    assert again == response and again is not first


# -- Heartbeat -------------------------------------------------------------------------------

HEARTBEAT = GROUP_APIS["Heartbeat"]
heartbeats = st.builds(
    g.Heartbeat,
    group_id=texts,
    generation_id=st.integers(INT32_MIN, INT32_MAX),
    member_id=texts,
    group_instance_id=st.none() | texts,
)


def heartbeat_fields(body: object) -> tuple[object, ...]:
    return tuple(getattr(body, f) for f in ("group_id", "generation_id", "member_id",
                                            "group_instance_id"))  # fmt: skip


@settings(max_examples=300)
@given(heartbeats, st.data())
def test_a_binary_heartbeat_carries_what_the_json_one_does(
    body: g.Heartbeat, data: st.DataObject
) -> None:
    encoded = encode_request_body(1, body)
    decoded = decode_body(HEARTBEAT, 1, encoded)
    assert type(decoded) is BinaryHeartbeat
    from_json = decode_body(HEARTBEAT, 0, encode_request_body(0, body))
    assert heartbeat_fields(decoded) == heartbeat_fields(body) == heartbeat_fields(from_json)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(RequestBodyError, match="malformed Heartbeat body") as refused:
        decode_heartbeat(encoded[:cut])
    assert refused.value.malformed


def test_a_heartbeats_empty_response_is_no_bytes_at_version_1() -> None:
    assert encode_reply_body(1, Empty()) == b""
    assert encode_reply_body(0, Empty()) == b"{}"
    assert decode_reply_body(1, Empty, b"") == Empty()
    with pytest.raises(RequestBodyError, match="1 bytes after the body"):
        decode_reply_body(1, Empty, b"x")
