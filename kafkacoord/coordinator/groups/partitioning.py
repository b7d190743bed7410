"""Which group-metadata partition owns a group (Kafka's
``GroupCoordinatorService.partitionFor``).

Kafka maps a group to a partition of its offsets topic with::

    Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions

(``GroupMetadataManager.partitionFor`` in the Scala coordinator,
``GroupCoordinatorService.partitionFor`` in the Java one). The pieces are reproduced exactly:

- ``String.hashCode()`` is ``s[0]*31^(n-1) + ... + s[n-1]`` in wrapping 32-bit arithmetic over
  the string's UTF-16 *code units*, so a character outside the Basic Multilingual Plane (an
  emoji, say) contributes its two surrogates (:func:`java_string_hash`).
- ``org.apache.kafka.common.utils.Utils.abs(n)`` is ``Math.abs(n)`` except that
  ``Integer.MIN_VALUE`` maps to ``0`` (``Math.abs`` would return ``MIN_VALUE`` itself)
  (:func:`kafka_abs`). It is *not* ``n & 0x7fffffff`` (that is ``Utils.toPositive``, used by the
  producer's partitioner): ``"Hello World"`` hashes to ``-862545276``, and ``Utils.abs`` gives
  ``862545276`` where the mask would give ``1284938372``.
"""

from __future__ import annotations

import array
import operator
import sys
import threading

__all__ = ["INT32_MIN", "java_string_hash", "kafka_abs", "partition_for"]

INT32_MIN = -(2**31)
_MASK32 = 0xFFFFFFFF


def _to_int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s``, as a signed 32-bit int.

    Computed over UTF-16 code units: ``"\\U0001F600"`` (an emoji, one code point) is the two
    units ``0xD83D 0xDE00`` and hashes to ``0xD83D * 31 + 0xDE00 == 1772899``. Lone surrogates
    (which Python strings may hold) count as the single code unit they are.
    """
    units = array.array("H", s.encode("utf-16-be", "surrogatepass"))
    if sys.byteorder == "little":
        units.byteswap()
    # The sum of unit * 31^(n-1-i), mod 2^32, with the loop in C: a group id of Kafka's
    # longest string (32,767 characters) hashes in about 1.5 ms instead of 4.4.
    return _to_int32(sum(map(operator.mul, units, _powers(len(units)))) & _MASK32)


_POWERS: list[int] = [1]  # 31^i mod 2^32, grown as longer strings come
_GROWING = threading.Lock()


def _powers(n: int) -> list[int]:
    """31^(n-1), ..., 31^0 (mod 2^32): the weights of a string of ``n`` code units."""
    powers = _POWERS
    if len(powers) < n:
        with _GROWING:  # two threads growing it at once would append a power twice
            while len(powers) < n:
                powers.append(powers[-1] * 31 & _MASK32)
    return powers[n - 1 :: -1] if n else []


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` on a 32-bit int: ``abs(n)``, except ``Integer.MIN_VALUE`` -> ``0``."""
    n = _to_int32(n)
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition that owns ``group_id``.

    ``Utils.abs(groupId.hashCode()) % numPartitions``. A group id whose hash is
    ``Integer.MIN_VALUE`` (e.g. ``"polygenelubricants"``) lands on partition 0.

    Raises ``TypeError`` unless ``num_partitions`` is an int (the compiled build's own
    argument check says the same), ``ValueError`` unless it is positive.
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError(f"num_partitions must be an int, got {num_partitions!r}")
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
