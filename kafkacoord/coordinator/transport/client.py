"""The calling side: send a request, wait for its reply, retry what is retriable.

One producer sends requests; one consumer reads this client's partition of the
responses topic from where it stood at start-up and completes the futures of
matching correlation ids. Every attempt of one call reuses its correlation id,
so a server that already answered it replays its cached reply instead of acting
twice.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar, cast

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafkacoord.codecs.models import ResponseValue
from kafkacoord.storage.clients import base_config, close_after, durable_producer

from ..protocol import Body, ErrorCode
from ..protocol.apis import decode_response
from .envelope import decode_reply, encode_request, error_of, poll_batch, reply_partition

log = structlog.get_logger(__name__)

B = TypeVar("B", bound=Body)

# Some brokers (tansu) answer a waiting fetch only when its wait ends, not when data
# arrives, so the wait bounds latency; every fetch also costs the broker CPU. Requests
# and replies on the hot path poll every 5 ms; background traffic (heartbeats,
# metadata, controller requests) every 50 ms, a tenth of the fetches.
LOW_LATENCY_FETCH_WAIT_MS = 5
BACKGROUND_FETCH_WAIT_MS = 50


def polling_consumer(fetch_wait_ms: int) -> dict[str, int]:
    return {"fetch.wait.max.ms": fetch_wait_ms, "fetch.error.backoff.ms": 20}


class RequestError(Exception):
    """The server answered with an error (or never answered in time)."""

    def __init__(
        self, api: str, code: ErrorCode, message: str | None = None, body: bytes = b""
    ) -> None:
        detail = f": {message}" if message else ""
        super().__init__(f"{api} failed with {code.name}{detail}")
        self.api = api
        self.code = code
        self.message = message
        # Some errors carry a body too (JoinGroup's MEMBER_ID_REQUIRED names the member id).
        self.body = body

    def response(self, response_type: type[B]) -> B | None:
        if not self.body:
            return None
        return response_type.model_validate_json(self.body)


class RequestTimeoutError(RequestError):
    def __init__(self, api: str, waited_s: float) -> None:
        super().__init__(
            api, ErrorCode.REQUEST_TIMED_OUT, f"no reply within {waited_s:.1f}s; is a daemon up?"
        )


class RequestClient:
    """Thread-safe request/reply client for one process (or one logical caller)."""

    def __init__(
        self,
        bootstrap: str,
        responses_topic: str,
        responses_partitions: int,
        *,
        client_id: str | None = None,
        attempt_timeout_s: float = 5.0,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
        fetch_wait_ms: int = LOW_LATENCY_FETCH_WAIT_MS,
    ) -> None:
        self.client_id = client_id or f"kc-{uuid.uuid4().hex[:12]}"
        self.reply_to = reply_partition(self.client_id, responses_partitions)
        self._responses = TopicPartition(responses_topic, self.reply_to)
        self._attempt_timeout_s = attempt_timeout_s
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        # Start ids at a random point: a restarted client never matches old replies.
        self._ids = itertools.count(random.randrange(1 << 30))
        self._pending: dict[int, Future[ResponseValue]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._producer = durable_producer(bootstrap, self.client_id, linger_ms=0.5)
        self._consumer = Consumer(
            base_config(
                bootstrap,
                self.client_id,
                **{
                    "group.id": f"{self.client_id}-replies",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    **polling_consumer(fetch_wait_ms),
                },
            )
        )
        self._consumer.assign([self._start_position(bootstrap)])
        self._thread = threading.Thread(
            target=self._serve, name=f"{self.client_id}-replies", daemon=True
        )
        self._thread.start()

    def _start_position(self, bootstrap: str) -> TopicPartition:
        # ListOffsets may lag the true end on some brokers, never lead it: reading a
        # few old replies is harmless, they match no pending correlation id.
        try:
            _, high = self._consumer.get_watermark_offsets(self._responses, timeout=10)
        except KafkaException as exc:
            self.close()
            raise RequestError(
                "connect", ErrorCode.BROKER_NOT_AVAILABLE, f"{bootstrap}: {exc}"
            ) from exc
        return TopicPartition(self._responses.topic, self._responses.partition, high)

    # -- calls -------------------------------------------------------------------

    def send(
        self,
        topic: str,
        partition: int,
        api: str,
        body: Body,
        *,
        timeout_s: float | None = None,
        correlation_id: int | None = None,
    ) -> tuple[int, Future[ResponseValue]]:
        """One attempt: returns the correlation id and the future of the raw reply."""
        cid = next(self._ids) if correlation_id is None else correlation_id
        future: Future[ResponseValue] = Future()
        with self._lock:
            self._pending[cid] = future
        timeout_ms = int((timeout_s or self._attempt_timeout_s) * 1000)
        key, value = encode_request(
            self.client_id, cid, api, body, reply_to=self.reply_to, timeout_ms=timeout_ms
        )
        try:
            self._producer.produce(topic, value, key, partition)
        except (BufferError, KafkaException) as exc:
            self._forget(cid)
            future.set_exception(RequestError(api, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
        self._producer.poll(0)
        return cid, future

    def call(
        self,
        topic: str,
        partition: int,
        api: str,
        body: Body,
        response_type: type[B] | None = None,
        *,
        timeout_s: float = 30.0,
        attempt_timeout_s: float | None = None,
    ) -> B:
        """Send until answered or ``timeout_s`` passes; retriable errors back off and resend."""
        attempt_timeout = attempt_timeout_s or self._attempt_timeout_s
        deadline = time.monotonic() + timeout_s
        cid: int | None = None
        backoff = self._backoff_s
        last: RequestError | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last or RequestTimeoutError(api, timeout_s)
            cid, future = self.send(
                topic, partition, api, body, timeout_s=attempt_timeout, correlation_id=cid
            )
            try:
                reply = future.result(timeout=min(attempt_timeout, remaining))
            except FutureTimeout:
                last = RequestTimeoutError(api, timeout_s)
                continue
            except RequestError as exc:
                last = exc
            else:
                code = error_of(reply)
                if code is ErrorCode.NONE:
                    self._forget(cid)
                    return cast(B, decode_response(api, reply.body))
                last = RequestError(api, code, reply.error_message, reply.body)
                if not code.retriable:
                    self._forget(cid)
                    raise last
            time.sleep(min(backoff * random.uniform(0.5, 1.0), max(deadline - time.monotonic(), 0)))
            backoff = min(backoff * 2, self._max_backoff_s)

    # -- replies -----------------------------------------------------------------

    def _forget(self, cid: int) -> None:
        with self._lock:
            self._pending.pop(cid, None)

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                messages = poll_batch(self._consumer, 500, 0.05)
            except (KafkaException, RuntimeError):
                if self._closing.is_set():
                    return
                raise
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("reply fetch error", error=error.str())
                    continue
                reply = decode_reply(msg.key(), msg.value())
                if reply is None or reply.client_id != self.client_id:
                    continue
                with self._lock:
                    future = self._pending.pop(reply.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(reply)

    def close(self) -> None:
        self._closing.set()
        if getattr(self, "_thread", None) is not None:
            close_after(self._thread, self._consumer)
        else:
            self._consumer.close()
        self._producer.flush(5)
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(RequestError("close", ErrorCode.REQUEST_TIMED_OUT, "closed"))

    def __enter__(self) -> RequestClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
