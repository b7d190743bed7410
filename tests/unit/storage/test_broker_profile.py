"""Reading a broker's ApiVersions answer into the profile that gates quirk paths."""

from __future__ import annotations

import struct

import pytest

from kafkacoord.storage.broker_profile import (
    APACHE_KAFKA,
    QUIRK_SAFE,
    parse_api_versions,
    profile_of,
)


def frame(apis: dict[int, tuple[int, int]], *, error: int = 0, correlation: int = 1) -> bytes:
    body = struct.pack(">ihi", correlation, error, len(apis))
    return body + b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in apis.items())


def test_a_kraft_broker_is_apache_kafka_and_others_are_quirk_safe() -> None:
    kafka = parse_api_versions(frame({0: (0, 13), 18: (0, 5), 55: (0, 2)}))
    assert kafka[55] == (0, 2)
    assert profile_of(kafka) is APACHE_KAFKA
    tansu = parse_api_versions(frame({0: (0, 11), 18: (0, 4), 71: (0, 0)}))
    assert profile_of(tansu) is QUIRK_SAFE


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x00\x00", "bytes"),
        (frame({18: (0, 4)}, error=35), "error code 35"),
        (frame({18: (0, 4), 55: (0, 2)})[:-3], "truncated"),
    ],
)
def test_a_bad_answer_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_api_versions(raw)
