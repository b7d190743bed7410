"""Durable appends with per-record futures, for tests and benches: writing records to
a real broker, and the plain append the benches compare the daemon's writers with.

Records go through one idempotent ``acks=all`` librdkafka producer with a short
linger, so appends that arrive together are sent as one batch. A record's future
resolves only once the broker has acknowledged it durably. The daemon itself appends
through the shard writers (``coordinator/runtime/writer.py``, ``epoch_writer.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, cast

import structlog
from confluent_kafka import KafkaError, Message

from kafkacoord.storage.clients import durable_producer
from kafkacoord.storage.errors import AppendError

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Appended:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class PendingRecord:
    topic: str
    partition: int
    key: bytes
    value: bytes | None


class Appender:
    """Thread-safe; a background thread serves delivery reports."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kafkacoord-appender",
        linger_ms: float = 2.0,
        queue_timeout_s: float = 30.0,
        producer_config: dict[str, Any] | None = None,
    ) -> None:
        self._producer = durable_producer(
            bootstrap, client_id, linger_ms=linger_ms, **(producer_config or {})
        )
        self._queue_timeout_s = queue_timeout_s
        self._failed: AppendError | None = None
        self._closing = threading.Event()
        self._poller = threading.Thread(
            target=self._serve, name=f"{client_id}-delivery", daemon=True
        )
        self._poller.start()

    def append(
        self, topic: str, partition: int, key: bytes, value: bytes | None
    ) -> Future[Appended]:
        future: Future[Appended] = Future()
        if self._failed is not None:
            future.set_exception(self._failed)
            return future

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                future.set_result(Appended(topic, partition, cast(int, msg.offset())))
                return
            error = AppendError(
                f"append to {topic}-{partition} failed: {err.str()}",
                retriable=err.retriable(),
                fatal=err.fatal(),
            )
            if err.fatal():
                self._failed = error
            future.set_exception(error)

        deadline = time.monotonic() + self._queue_timeout_s
        while True:
            try:
                self._producer.produce(topic, value, key, partition, on_delivery=delivered)
                return future
            except BufferError:
                # The local queue is full: let deliveries drain, within a bound.
                if time.monotonic() > deadline:
                    future.set_exception(
                        AppendError("producer queue full: broker too slow", retriable=True)
                    )
                    return future
                self._producer.poll(0.005)

    def append_many(self, records: Sequence[PendingRecord]) -> list[Future[Appended]]:
        return [self.append(r.topic, r.partition, r.key, r.value) for r in records]

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for every queued record; return how many are still undelivered."""
        remaining: int = self._producer.flush(timeout_s)
        return remaining

    def _serve(self) -> None:
        while not self._closing.is_set():
            self._producer.poll(0.05)

    def close(self, timeout_s: float = 30.0) -> None:
        remaining = self.flush(timeout_s)
        if remaining:
            # Fail the undelivered futures rather than leave callers waiting forever.
            log.warning("appender closed with undelivered records", undelivered=remaining)
            self._producer.purge()
            self._producer.poll(0)
        self._closing.set()
        self._poller.join()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
