"""The Kafka requests an idempotent producer needs, encoded by hand.

Only two APIs, at versions every supported broker serves (Apache Kafka 3.x/4.x,
tansu): InitProducerId v4 (a flexible version: tansu needs its producer id and
epoch fields) and Produce v7 (record batches v2, one request for many
partitions). Record batches are built by aiokafka's C builder, which also
computes their CRC32C.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka.record.default_records import DefaultRecordBatchBuilder

PRODUCE = 0
INIT_PRODUCER_ID = 22
PRODUCE_VERSION = 7
INIT_PRODUCER_ID_VERSION = 4
ACKS_ALL = -1
MAGIC = 2
NO_COMPRESSION = 0

Header = tuple[str, bytes]
RawRecord = tuple[bytes, bytes | None]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_PRODUCE_HEAD = struct.Struct(">hhii")  # null transactional id, acks, timeout, topics
_PARTITION_HEAD = struct.Struct(">ii")  # partition, records size
_INIT_BODY = struct.Struct(">iqhx")  # timeout, producer id, epoch; no tagged fields
_INIT_RESPONSE = struct.Struct(">ihqh")  # throttle, error, producer id, epoch
_PARTITION_RESPONSE = struct.Struct(">ihqqq")  # partition, error, base, append time, start
_COUNT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_CORRELATION = struct.Struct(">i")


class WireError(ValueError):
    """A response that does not parse as the API it answers."""


def frame(api_key: int, version: int, correlation_id: int, client_id: bytes,
          body: bytes, *, flexible: bool = False) -> bytes:  # fmt: skip
    """A sized request: header v1 (or v2, with empty tagged fields, when ``flexible``)."""
    header = _HEADER.pack(api_key, version, correlation_id, len(client_id)) + client_id
    if flexible:
        header += b"\0"
    return _SIZE.pack(len(header) + len(body)) + header + body


def correlation_of(response: bytes) -> int:
    try:
        value: int = _CORRELATION.unpack_from(response)[0]
    except struct.error as exc:
        raise WireError(f"a response of {len(response)} bytes has no correlation id") from exc
    return value


def init_producer_id_request(timeout_ms: int) -> bytes:
    """No transactional id (an idempotent producer); a new producer id and epoch."""
    return b"\0" + _INIT_BODY.pack(timeout_ms, -1, -1)


@dataclass(frozen=True, slots=True)
class ProducerIdentity:
    producer_id: int
    epoch: int


def init_producer_id_response(response: bytes) -> tuple[int, ProducerIdentity]:
    """(error code, identity); the response header v1 has one byte of tagged fields."""
    try:
        _, error, producer_id, epoch = _INIT_RESPONSE.unpack_from(response, 5)
    except struct.error as exc:
        raise WireError(f"InitProducerId response of {len(response)} bytes: {exc}") from exc
    return error, ProducerIdentity(producer_id, epoch)


def record_batch(
    identity: ProducerIdentity,
    base_sequence: int,
    records: Sequence[RawRecord],
    headers: Sequence[Header],
    timestamp_ms: int,
) -> bytes:
    """One v2 batch of ``records``, every one with ``headers``, for an idempotent producer."""
    builder = DefaultRecordBatchBuilder(
        MAGIC, NO_COMPRESSION, 0, identity.producer_id, identity.epoch, base_sequence, 1 << 30
    )
    header_list = list(headers)
    for delta, (key, value) in enumerate(records):
        builder.append(delta, timestamp_ms, key, value, header_list)
    return bytes(builder.build())


def produce_request(timeout_ms: int, topics: dict[str, list[tuple[int, bytes]]]) -> bytes:
    """acks=all; ``topics`` maps each topic to its (partition, record batch) pairs."""
    parts = [_PRODUCE_HEAD.pack(-1, ACKS_ALL, timeout_ms, len(topics))]
    for topic, partitions in topics.items():
        name = topic.encode()
        parts.append(_SHORT.pack(len(name)) + name + _COUNT.pack(len(partitions)))
        for partition, batch in partitions:
            parts.append(_PARTITION_HEAD.pack(partition, len(batch)))
            parts.append(batch)
    return b"".join(parts)


def produce_response(response: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, base offset), from a v7 response (header v0)."""
    try:
        result: dict[tuple[str, int], tuple[int, int]] = {}
        position = 4
        (topics,) = _COUNT.unpack_from(response, position)
        position += 4
        for _ in range(topics):
            (length,) = _SHORT.unpack_from(response, position)
            position += 2
            topic = response[position : position + length].decode()
            position += length
            (partitions,) = _COUNT.unpack_from(response, position)
            position += 4
            for _ in range(partitions):
                partition, error, base, _, _ = _PARTITION_RESPONSE.unpack_from(response, position)
                position += _PARTITION_RESPONSE.size
                result[(topic, partition)] = (error, base)
    except (struct.error, UnicodeDecodeError) as exc:
        raise WireError(f"Produce response of {len(response)} bytes: {exc}") from exc
    return result


__all__ = [
    "Header",
    "ProducerIdentity",
    "RawRecord",
    "WireError",
    "correlation_of",
    "frame",
    "init_producer_id_request",
    "init_producer_id_response",
    "produce_request",
    "produce_response",
    "record_batch",
]
