"""OffsetFetch's and ConsumerGroupHeartbeat's binary bodies (api version 1) against JSON.

What a JSON body carries, the binary one carries to the same fields, nulls included
(a null topic list fetches every offset; a null heartbeat field is unchanged); a cut
body or stray bytes are malformed; any bytes decode or are refused, never another
exception; replies round-trip to the model the JSON one decodes to.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kafkacoord.coordinator.protocol import GROUP_APIS, Body, ErrorCode, RequestBodyError
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.binary import (
    BINARY_BODIES,
    decode_body,
    decode_reply_body,
    encode_reply_body,
    encode_request_body,
)
from kafkacoord.coordinator.protocol.binary_commit import decode_heartbeat, encode_heartbeat
from kafkacoord.coordinator.protocol.binary_consumer import (
    decode_consumer_heartbeat,
    encode_consumer_heartbeat,
)
from kafkacoord.coordinator.protocol.binary_fetch import (
    decode_offset_fetch,
    encode_offset_fetch,
)
from kafkacoord.coordinator.protocol.types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    LIST_MAX,
)

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)


def _fields(body: object, like: object) -> object:
    """``body``'s fields as plain values, named as the JSON model ``like`` names them
    (compiled classes have no ``__slots__`` to list)."""
    if isinstance(like, BaseModel):
        return {name: _fields(getattr(body, name), getattr(like, name))
                for name in type(like).model_fields}  # fmt: skip
    if isinstance(like, list):
        assert isinstance(body, list)
        return len(body), [_fields(b, item) for b, item in zip(body, like, strict=False)]
    return body


# -- OffsetFetch -------------------------------------------------------------------------------

fetches = st.builds(
    g.OffsetFetch,
    group_id=texts,
    topics=st.none()
    | st.lists(st.builds(g.FetchTopic, name=texts, partitions=st.lists(int32s, max_size=5)),
               max_size=3),
    require_stable=st.booleans(),
)  # fmt: skip


def test_a_null_topic_list_is_not_an_empty_one() -> None:
    every = decode_offset_fetch(encode_offset_fetch(g.OffsetFetch(group_id="g")))
    none = decode_offset_fetch(encode_offset_fetch(g.OffsetFetch(group_id="g", topics=[])))
    assert every.topics is None and none.topics == []


def _raw_fetch(count: int) -> bytes:
    return (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + (struct.pack(">i", count) + struct.pack(">i", 0) + b"\x00")
    )


def test_a_partition_count_past_the_list_bound_is_refused_and_past_the_body_malformed() -> None:
    with pytest.raises(RequestBodyError, match=f"at most {LIST_MAX}") as beyond:
        decode_offset_fetch(_raw_fetch(LIST_MAX + 1))
    assert not beyond.value.malformed
    with pytest.raises(RequestBodyError, match="cannot fit") as short:
        decode_offset_fetch(_raw_fetch(1000))
    assert short.value.malformed
    assert decode_offset_fetch(_raw_fetch(1)).topics[0].partitions == [0]  # type: ignore[index]


fetched = st.builds(
    g.FetchedPartition,
    partition=int32s,
    offset=int64s,
    leader_epoch=int32s,
    metadata=st.none() | texts,
    commit_timestamp_ms=int64s,
    expire_timestamp_ms=int64s,
    error=st.sampled_from(ErrorCode),
)


@settings(max_examples=200)
@given(st.lists(st.builds(g.FetchedTopic, name=texts, partitions=st.lists(fetched, max_size=4)),
                max_size=3))  # fmt: skip
def test_an_offset_fetch_reply_round_trips(topics: list[g.FetchedTopic]) -> None:
    response = g.OffsetFetchResponse(topics=topics)
    encoded = encode_reply_body(1, response)
    assert decode_reply_body(1, g.OffsetFetchResponse, encoded) == response
    assert decode_reply_body(0, g.OffsetFetchResponse, encode_reply_body(0, response)) == response
    assert len(encoded) < len(encode_reply_body(0, response)) or not topics


# -- ConsumerGroupHeartbeat --------------------------------------------------------------------

owned = st.lists(
    st.builds(g.HeartbeatTopicPartitions, topic=texts, partitions=st.lists(int32s, max_size=4)),
    max_size=3,
)
consumer_heartbeats = st.builds(
    g.ConsumerGroupHeartbeat,
    group_id=texts,
    member_id=texts,
    member_epoch=int32s,
    instance_id=st.none() | texts,
    rack_id=st.none() | texts,
    rebalance_timeout_ms=int32s,
    subscribed_topic_names=st.none() | st.lists(texts, max_size=4),
    subscribed_topic_regex=st.none() | texts,
    server_assignor=st.none() | texts,
    topic_partitions=st.none() | owned,
    client_id=texts,
    client_host=texts,
)


@settings(max_examples=200)
@given(st.builds(g.ConsumerGroupHeartbeatResponse, member_id=st.none() | texts,
                 member_epoch=int32s, heartbeat_interval_ms=int32s,
                 assignment=st.none() | owned))  # fmt: skip
def test_a_consumer_heartbeat_reply_round_trips(response: g.ConsumerGroupHeartbeatResponse) -> None:
    encoded = encode_reply_body(1, response)
    assert decode_reply_body(1, g.ConsumerGroupHeartbeatResponse, encoded) == response


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda b: b + b"\x00", "1 bytes after the body"),
        (lambda b: b[:2] + b"\xff" + b[3:], "not UTF-8"),
        (lambda b: b"\xff\xff" + b[2:], "null where a string is required"),
    ],
    ids=["stray byte", "bad UTF-8", "null group id"],
)
def test_a_broken_consumer_heartbeat_is_malformed(
    mangle: Callable[[bytes], bytes], reason: str
) -> None:
    body = g.ConsumerGroupHeartbeat(group_id="g", member_id="m", member_epoch=0)
    with pytest.raises(RequestBodyError, match=reason) as refused:
        decode_consumer_heartbeat(mangle(encode_consumer_heartbeat(body)))
    assert refused.value.malformed


# -- both, and Heartbeat -----------------------------------------------------------------------

REQUESTS: dict[str, st.SearchStrategy[Body]] = {
    "OffsetFetch": fetches,
    "ConsumerGroupHeartbeat": consumer_heartbeats,
}
CODECS: dict[str, tuple[Callable[[bytes], object], Callable[[Any], bytes]]] = {
    "Heartbeat": (decode_heartbeat, encode_heartbeat),
    "OffsetFetch": (decode_offset_fetch, encode_offset_fetch),
    "ConsumerGroupHeartbeat": (decode_consumer_heartbeat, encode_consumer_heartbeat),
}


@pytest.mark.parametrize("api", sorted(REQUESTS))
@settings(max_examples=300)
@given(data=st.data())
def test_a_binary_body_carries_what_the_json_one_does(api: str, data: st.DataObject) -> None:
    spec = GROUP_APIS[api]
    body = data.draw(REQUESTS[api])
    encoded = encode_request_body(1, body)
    decoded = decode_body(spec, 1, encoded)
    assert type(decoded) is BINARY_BODIES[api]
    from_json = decode_body(spec, 0, encode_request_body(0, body))
    assert type(from_json) is type(body)
    assert _fields(decoded, body) == _fields(body, body) == _fields(from_json, body)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(RequestBodyError, match=f"malformed {api} body") as refused:
        decode_body(spec, 1, encoded[:cut])
    assert refused.value.malformed


@pytest.mark.parametrize("api", sorted(CODECS))
@settings(max_examples=500)
@given(data=st.binary(max_size=80))
def test_any_bytes_decode_or_are_refused(api: str, data: bytes) -> None:
    decode, encode = CODECS[api]
    try:
        decoded = decode(data)
    except RequestBodyError as exc:
        assert exc.code is ErrorCode.INVALID_REQUEST
        return
    assert encode(decoded) == data  # nothing was read loosely
