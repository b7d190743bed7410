"""The serving side's consumer: requests of the partitions this process owns.

When a partition is (re)assigned, reading starts at the log end: requests sent
before then belong to the previous owner, or their callers resend them. The end
is where the first partition-EOF lands, which is right even on brokers whose
ListOffsets answer lags the true end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import cast

import structlog
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from kafkacoord.codecs import CodecError
from kafkacoord.storage.clients import base_config, close_after

from ..protocol import ApiSpec, ErrorCode, ProtocolError, decode_request
from ..runtime.shard import Reply, Request, RequestRef
from .client import LOW_LATENCY_FETCH_WAIT_MS, polling_consumer
from .envelope import decode_request as decode_envelope
from .envelope import now_ms, poll_batch
from .replies import ReplySender

log = structlog.get_logger(__name__)

Dispatch = Callable[[int, Request], None]


class RequestReceiver:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        apis: dict[str, ApiSpec],
        dispatch: Dispatch,
        replies: ReplySender,
        *,
        client_id: str,
        clock_ms: Callable[[], int] = now_ms,
        fetch_wait_ms: int = LOW_LATENCY_FETCH_WAIT_MS,
    ) -> None:
        self.topic = topic
        self._apis = apis
        self._dispatch = dispatch
        self._replies = replies
        self._clock_ms = clock_ms
        self.poison = 0
        self.expired = 0
        self.received = 0
        # Errors this receiver answered itself, before any shard saw the request.
        self.rejected: dict[str, int] = {}
        self._wanted: set[int] = set()
        self._assigned: set[int] = set()
        self._skipping: set[int] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._consumer = Consumer(
            base_config(
                bootstrap,
                client_id,
                **{
                    "group.id": f"{client_id}-requests",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "latest",
                    **polling_consumer(fetch_wait_ms),
                },
            )
        )
        self._thread = threading.Thread(target=self._serve, name=f"{client_id}-recv", daemon=True)
        self._thread.start()

    def assign(self, partitions: Iterable[int]) -> None:
        """Serve exactly these partitions from now on (applied by the polling thread)."""
        with self._lock:
            self._wanted = set(partitions)

    def _reconcile(self) -> None:
        with self._lock:
            wanted = set(self._wanted)
        gone = self._assigned - wanted
        new = wanted - self._assigned
        if gone:
            self._consumer.incremental_unassign([TopicPartition(self.topic, p) for p in gone])
            self._skipping -= gone
        if new:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_END) for p in new]
            )
            self._skipping |= new
        self._assigned = wanted

    def _serve(self) -> None:
        while not self._closing.is_set():
            self._reconcile()
            if not self._assigned:
                time.sleep(0.02)
                continue
            try:
                messages = poll_batch(self._consumer, 1000, 0.05)
            except (KafkaException, RuntimeError):
                if self._closing.is_set():
                    return
                raise
            for msg in messages:
                self._on_message(msg)

    def _on_message(self, msg: Message) -> None:
        partition = cast(int, msg.partition())
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._skipping.discard(partition)
            else:
                log.warning("request fetch error", topic=self.topic, error=error.str())
            return
        if partition in self._skipping or partition not in self._assigned:
            return
        try:
            envelope = decode_envelope(msg.key(), msg.value())
        except CodecError as exc:
            self.poison += 1
            log.warning("skipped poison request", topic=self.topic, partition=partition,
                        offset=msg.offset(), reason=str(exc))  # fmt: skip
            return
        ref = RequestRef(envelope.client_id, envelope.correlation_id, envelope.reply_partition)
        deadline = envelope.sent_ms + envelope.timeout_ms
        if deadline < self._clock_ms():
            self.expired += 1  # the caller has given up on this attempt
            return
        try:
            body = decode_request(self._apis, envelope.api, envelope.body)
        except ProtocolError as exc:
            log.info("rejected malformed request", api=envelope.api, client=envelope.client_id,
                     reason=exc.message)  # fmt: skip
            self._count_reject(exc.code)
            self._replies.send([Reply(ref, envelope.api, exc.code, None, exc.message)])
            return
        self.received += 1
        self._dispatch(partition, Request(ref, envelope.api, body, deadline))

    def reject(self, request: Request, code: ErrorCode, message: str | None = None) -> None:
        self._count_reject(code)
        self._replies.send([Reply(request.ref, request.api, code, None, message)])

    def _count_reject(self, code: ErrorCode) -> None:
        self.rejected[code.name] = self.rejected.get(code.name, 0) + 1

    def close(self) -> None:
        self._closing.set()
        close_after(self._thread, self._consumer)
