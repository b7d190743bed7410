"""Kafka's consumer protocol Subscription / Assignment bytes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.groups.consumer_protocol import (
    LATEST_VERSION,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_subscription_v0_bytes_match_kafka_layout() -> None:
    data = encode_subscription(Subscription(("t", "ab")), version=0)
    assert data == (
        b"\x00\x00"  # version 0
        b"\x00\x00\x00\x02"  # 2 topics
        b"\x00\x01t"
        b"\x00\x02ab"
        b"\xff\xff\xff\xff"  # null user data
    )


def test_subscription_v3_bytes_match_kafka_layout() -> None:
    sub = Subscription(("t",), b"u", (("t", 1), ("t", 2), ("x", 0)), 7, "r1")
    assert encode_subscription(sub) == (
        b"\x00\x03"
        b"\x00\x00\x00\x01\x00\x01t"
        b"\x00\x00\x00\x01u"
        b"\x00\x00\x00\x02"  # owned: 2 topics, grouped
        b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"
        b"\x00\x01x\x00\x00\x00\x01\x00\x00\x00\x00"
        b"\x00\x00\x00\x07"  # generation
        b"\x00\x02r1"  # rack
    )


def test_assignment_bytes_match_kafka_layout() -> None:
    data = encode_assignment(Assignment((("t", 0),), None), version=1)
    assert (
        data == b"\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"
    )


@pytest.mark.parametrize("version", range(LATEST_VERSION + 1))
def test_older_versions_drop_newer_fields(version: int) -> None:
    sub = Subscription(("a",), b"x", (("a", 0),), 3, "rack")
    got = decode_subscription(encode_subscription(sub, version))
    assert got.topics == ("a",) and got.user_data == b"x"
    assert got.owned_partitions == (sub.owned_partitions if version >= 1 else ())
    assert got.generation_id == (3 if version >= 2 else -1)
    assert got.rack_id == ("rack" if version >= 3 else None)


def test_newer_version_is_read_with_latest_layout() -> None:
    data = bytearray(encode_subscription(Subscription(("a",))))
    data[0:2] = b"\x00\x09"
    data += b"future fields"
    assert decode_subscription(bytes(data)).topics == ("a",)


def test_empty_assignment_bytes_mean_no_assignment() -> None:
    assert decode_assignment(b"") == Assignment()


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x00\x00\x00\x00\x05", b"\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x05ab"],
)
def test_garbage_subscription_raises(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_bad_version_to_encode() -> None:
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(Subscription(()), version=4)


names = st.text(max_size=20)
tps = st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=8)


@given(
    topics=st.lists(names, max_size=6),
    user_data=st.none() | st.binary(max_size=30),
    owned=tps,
    generation=st.integers(-(2**31), 2**31 - 1),
    rack=st.none() | names,
)
def test_subscription_roundtrip(
    topics: list[str],
    user_data: bytes | None,
    owned: list[tuple[str, int]],
    generation: int,
    rack: str | None,
) -> None:
    # Owned partitions come back grouped by topic (first-seen order), as Kafka encodes them.
    grouped: dict[str, list[int]] = {}
    for t, p in owned:
        grouped.setdefault(t, []).append(p)
    expected_owned = tuple((t, p) for t, ps in grouped.items() for p in ps)
    sub = Subscription(tuple(topics), user_data, tuple(owned), generation, rack)
    got = decode_subscription(encode_subscription(sub))
    assert got == Subscription(tuple(topics), user_data, expected_owned, generation, rack)


@given(partitions=tps, user_data=st.none() | st.binary(max_size=30))
def test_assignment_roundtrip(partitions: list[tuple[str, int]], user_data: bytes | None) -> None:
    got = decode_assignment(encode_assignment(Assignment(tuple(partitions), user_data)))
    assert sorted(got.partitions) == sorted(partitions) and got.user_data == user_data


@given(st.binary(max_size=64))
def test_decoding_garbage_never_crashes_otherwise(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ConsumerProtocolError):
            decode(data)
