"""Group -> offsets-partition hash: Java ``String.hashCode`` and Kafka's ``Utils.abs``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.groups import java_string_hash, partition_for
from kafkacoord.coordinator.groups.partitioning import INT32_MIN, kafka_abs

# (string, String.hashCode(), partition for 50 partitions, partition for 7 partitions), as
# printed by a JVM (OpenJDK 17) with Kafka's ``Utils.abs(s.hashCode()) % n``.
JAVA_VECTORS = [
    ("", 0, 0, 0),
    ("hello", 99162322, 22, 0),
    ("Hello World", -862545276, 26, 5),
    ("polygenelubricants", INT32_MIN, 0, 0),
    ("GydZG_", INT32_MIN, 0, 0),
    ("DESIGNING WORKHOUSES", INT32_MIN, 0, 0),
    ("Aa", 2112, 12, 5),
    ("BB", 2112, 12, 5),
    ("\U0001f600", 1772899, 49, 2),
    ("caf\u00e9", 3045921, 21, 4),
    ("my-group", -1906497762, 12, 1),
    ("console-consumer-12345", 158455506, 6, 6),
    ("\u4e2d\u6587\u7ec4", 20070666, 16, 0),
    ("group-\U0001f680-x", -1358329444, 44, 3),
]


@pytest.mark.parametrize(("s", "expected_hash", "p50", "p7"), JAVA_VECTORS)
def test_java_vectors(s: str, expected_hash: int, p50: int, p7: int) -> None:
    assert java_string_hash(s) == expected_hash
    assert partition_for(s, 50) == p50
    assert partition_for(s, 7) == p7


def test_emoji_hash_by_hand_from_utf16() -> None:
    # U+1F600 is the surrogate pair D83D DE00: hash = 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00 == 1772899
    # Two code points, three UTF-16 units: 'a' then the pair.
    assert java_string_hash("a\U0001f600") == (97 * 31 + 0xD83D) * 31 + 0xDE00


def test_min_value_hash_goes_to_partition_zero() -> None:
    assert java_string_hash("polygenelubricants") == -(2**31)
    for n in (1, 3, 50, 1000):
        assert partition_for("polygenelubricants", n) == 0


def test_utils_abs_is_not_a_bit_mask() -> None:
    # Kafka's Utils.abs is Math.abs except MIN_VALUE -> 0; the mask (toPositive) differs.
    h = java_string_hash("Hello World")
    assert kafka_abs(h) == 862545276
    assert (h & 0x7FFFFFFF) == 1284938372
    assert partition_for("Hello World", 50) == 862545276 % 50
    assert kafka_abs(INT32_MIN) == 0
    assert kafka_abs(-1) == 1
    assert kafka_abs(2**31 - 1) == 2**31 - 1


def test_lone_surrogate_is_one_code_unit() -> None:
    assert java_string_hash("\ud800") == 0xD800
    assert java_string_hash("x\udc00") == 120 * 31 + 0xDC00


@pytest.mark.parametrize("bad", [0, -1, -50])
def test_num_partitions_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for("g", bad)


@pytest.mark.parametrize("bad", [1.0, "50", None])
def test_num_partitions_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="int"):
        partition_for("g", bad)  # type: ignore[arg-type]


@pytest.mark.sources  # compiled, a bool converts to the int argument before the check
def test_num_partitions_must_not_be_a_bool() -> None:
    with pytest.raises(TypeError, match="int"):
        partition_for("g", True)


def _reference_hash(s: str) -> int:
    """Straightforward String.hashCode: split astral code points into surrogates by hand."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def _reference_partition(group_id: str, n: int) -> int:
    h = _reference_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % n


@given(st.text(max_size=40), st.integers(min_value=1, max_value=10_000))
def test_matches_reference(group_id: str, n: int) -> None:
    h = java_string_hash(group_id)
    assert h == _reference_hash(group_id)
    assert -(2**31) <= h < 2**31
    p = partition_for(group_id, n)
    assert p == _reference_partition(group_id, n)
    assert 0 <= p < n


@given(st.text(max_size=20), st.text(max_size=20))
def test_hash_of_concatenation(a: str, b: str) -> None:
    # hash(a + b) == hash(a) * 31^len16(b) + hash(b)  (mod 2^32)
    len16 = len(b.encode("utf-16-be", "surrogatepass")) // 2
    combined = (java_string_hash(a) * pow(31, len16, 2**32) + java_string_hash(b)) % 2**32
    assert java_string_hash(a + b) % 2**32 == combined
