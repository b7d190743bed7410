"""Framing of requests and replies: the Avro envelope around a JSON body."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Message

from kafkacoord.codecs import CodecError, RecordType, decode_key, decode_value, encode_record
from kafkacoord.codecs.models import RequestKey, RequestValue, ResponseKey, ResponseValue
from kafkacoord.coordinator.groups.partitioning import partition_for

from ..protocol import Body, ErrorCode, encode_body
from ..runtime.shard import Reply


def poll_batch(consumer: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    """Wait for the first message only: ``consume(n, t)`` would wait out ``t`` for n of them."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_messages - 1, 0)]


def now_ms() -> int:
    return int(time.time() * 1000)


def reply_partition(client_id: str, partitions: int) -> int:
    """The responses partition a client reads: stable across processes and languages."""
    return partition_for(client_id, partitions)


def encode_request(
    client_id: str,
    correlation_id: int,
    api: str,
    body: Body,
    *,
    reply_to: int,
    timeout_ms: int,
    sent_ms: int | None = None,
) -> tuple[bytes, bytes]:
    value = RequestValue(
        client_id=client_id,
        correlation_id=correlation_id,
        api=api,
        api_version=0,
        reply_partition=reply_to,
        sent_ms=now_ms() if sent_ms is None else sent_ms,
        timeout_ms=timeout_ms,
        body=encode_body(body),
    )
    key, raw = encode_record(RequestKey(client_id), value)
    assert raw is not None
    return key, raw


def decode_request(key: bytes | None, value: bytes | None) -> RequestValue:
    """The envelope of a request; raises CodecError for anything that is not one."""
    if value is None:
        raise CodecError("request has no value", part="value")
    decoded_key = decode_key(key)
    if not isinstance(decoded_key, RequestKey):
        raise CodecError(f"{type(decoded_key).__name__} is not a request", part="key")
    decoded = decode_value(RecordType.REQUEST, value)
    assert isinstance(decoded, RequestValue)
    return decoded


def encode_reply(reply: Reply) -> tuple[bytes, bytes]:
    value = ResponseValue(
        client_id=reply.to.client_id,
        correlation_id=reply.to.correlation_id,
        api=reply.api,
        error_code=int(reply.error),
        sent_ms=now_ms(),
        body=b"" if reply.body is None else encode_body(reply.body),
        error_message=reply.message,
    )
    key, raw = encode_record(ResponseKey(reply.to.client_id), value)
    assert raw is not None
    return key, raw


def decode_reply(key: bytes | None, value: bytes | None) -> ResponseValue | None:
    """A reply's envelope, or None for anything that is not a well-formed reply."""
    if not key or value is None or key[0] != RecordType.RESPONSE:
        return None
    try:
        decoded = decode_value(RecordType.RESPONSE, value)
    except CodecError:
        return None
    return decoded if isinstance(decoded, ResponseValue) else None


def error_of(value: ResponseValue) -> ErrorCode:
    try:
        return ErrorCode(value.error_code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
