"""Envelopes of requests and responses carried over Kafka topics."""

from __future__ import annotations

from dataclasses import dataclass

from .base import AvroModel


@dataclass(frozen=True, slots=True)
class RequestKey(AvroModel):
    client_id: str


@dataclass(frozen=True, slots=True)
class RequestValue(AvroModel):
    client_id: str
    correlation_id: int
    api: str
    api_version: int
    reply_partition: int
    sent_ms: int
    timeout_ms: int
    body: bytes


@dataclass(frozen=True, slots=True)
class ResponseKey(AvroModel):
    client_id: str


@dataclass(frozen=True, slots=True)
class ResponseValue(AvroModel):
    client_id: str
    correlation_id: int
    api: str
    error_code: int
    sent_ms: int
    body: bytes
    error_message: str | None = None
