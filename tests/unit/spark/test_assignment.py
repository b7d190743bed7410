"""Kafka ConsumerProtocolAssignment decoding, and the hex fallback."""

from __future__ import annotations

import struct

from kafkacoord.spark.assignment import decode_assignment, encode_assignment, render


def test_roundtrip_of_every_known_version() -> None:
    for version in range(4):
        data = encode_assignment({"orders": [2, 0], "pay": [5]}, b"ud", version=version)
        decoded = decode_assignment(data)
        assert decoded is not None
        assert decoded.version == version
        assert decoded.partitions == (("orders", 2), ("orders", 0), ("pay", 5))
        assert decoded.user_data == b"ud"


def test_render_sorts_topics_and_partitions() -> None:
    assert render(encode_assignment({"pay": [5], "orders": [2, 0]})) == "orders:0,2;pay:5"
    assert render(encode_assignment({})) == ""
    assert render(b"") == ""
    assert render(None) == ""


def test_matches_kafkas_bytes_for_a_known_assignment() -> None:
    # Version 1, one topic "t" with partitions 0 and 1, null user data, as Kafka writes it.
    kafka = (
        struct.pack(">h", 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">i", -1)
    )
    assert render(kafka) == "t:0,1"


def test_garbage_falls_back_to_hex() -> None:
    assert render(b"\x00\x01\x02") == "0x000102"
    # Trailing bytes after a known version: not an assignment.
    assert render(encode_assignment({"t": [0]}) + b"x").startswith("0x")
    # A negative array length, a negative version.
    assert decode_assignment(struct.pack(">hi", 0, -5)) is None
    assert decode_assignment(struct.pack(">h", -1)) is None


def test_a_newer_version_may_append_fields() -> None:
    assert render(encode_assignment({"t": [3]}, version=7) + b"future") == "t:3"
