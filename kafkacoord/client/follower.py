"""Tails ``__kc_metadata`` from the start and hands every decoded record over, in order.

The first partition-EOF marks "caught up": everything up to the high watermark
has been seen, so a listener can act on the final state instead of on history.
Poison records (undecodable, or of a type that does not belong in the metadata
topic) are counted and skipped; in strict mode the follower stops at the first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import cast

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kafkacoord.codecs import CodecError, decode_record, record_type_of
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.clients import (
    PATIENT_FETCH_WAITS_MS,
    background_fetch_wait_ms,
    base_config,
    close_after,
    poll_batch,
    polling_consumer,
)
from kafkacoord.storage.errors import PoisonRecordError
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.poison import record_poison
from kafkacoord.storage.reader import REFETCH_AFTER_S

log = structlog.get_logger(__name__)

OnRecord = Callable[[Record, int], object]
# Which raw keys a listener wants; the others are skipped before anything is decoded.
KeyFilter = Callable[[bytes], bool]

_ALLOWED = metadata_policy().allowed


class MetadataFollower:
    """Tails ``__kc_metadata`` on its own thread and hands each decoded record over."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        on_record: OnRecord,
        *,
        client_id: str,
        on_caught_up: Callable[[], None] | None = None,
        start_offset: int = 0,
        wants: KeyFilter | None = None,
        fetch_wait_ms: int | None = None,
    ) -> None:
        """``fetch_wait_ms``: the tail's fetch wait (default: the broker's background
        wait, see :func:`kafkacoord.storage.clients.background_fetch_wait_ms`)."""
        self.topic = topic
        self._wants = wants
        self.poison = 0
        self.records = 0
        # The strict-mode stop, if any: the follower reads no further.
        self.failure: PoisonRecordError | None = None
        self.position = start_offset
        self._handed = start_offset  # the position, once the listener has returned
        self.caught_up = threading.Event()
        self._on_record = on_record
        self._on_caught_up = on_caught_up
        self._closing = threading.Event()
        self._bootstrap, self._client_id = bootstrap, client_id
        self.patience = 0  # longer fetch waits taken so far (see _reread_if_stalled)
        self._end_seen = -1  # where the last end-of-log was reported
        wait_ms = background_fetch_wait_ms(bootstrap) if fetch_wait_ms is None else fetch_wait_ms
        self._consumer = self._new_consumer(wait_ms, start_offset)
        self._thread = threading.Thread(target=self._serve, name=f"{client_id}-follow", daemon=True)
        self._thread.start()

    def _new_consumer(self, fetch_wait_ms: int, offset: int) -> Consumer:
        consumer = Consumer(
            base_config(
                self._bootstrap,
                self._client_id,
                **{
                    "group.id": f"{self._client_id}-metadata",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                    **polling_consumer(fetch_wait_ms),
                },
            )
        )
        consumer.assign([TopicPartition(self.topic, 0, offset)])
        return consumer

    def _reread_if_stalled(self, silent_s: float) -> bool:
        """Neither records nor the end of the log at this position for a while: tansu
        answers a fetch with what it lists within the wait, and on a large partition a
        short wait finds nothing (see :mod:`kafkacoord.storage.recovery`). Read on with a
        consumer whose wait is longer; True if the consumer was replaced. A tail quiet
        at the end of the log it has reached is not stalled: that end may lie past its
        position, by the marker that commits the controller's last transaction."""
        if silent_s < REFETCH_AFTER_S or self.patience >= len(PATIENT_FETCH_WAITS_MS):
            return False
        if self._end_seen >= self.position:
            return False
        wait_ms = PATIENT_FETCH_WAITS_MS[self.patience]
        self.patience += 1
        log.warning("metadata tail stalled; reading on with a longer fetch wait",
                    topic=self.topic, position=self.position, fetch_wait_ms=wait_ms)  # fmt: skip
        self._consumer.close()
        self._consumer = self._new_consumer(wait_ms, self.position)
        return True

    def wait_caught_up(self, timeout_s: float) -> bool:
        return self.caught_up.wait(timeout_s)

    @property
    def read_to(self) -> int:
        """The offset everything before which the listener has handled (or the follower
        skipped): past a transaction's closing marker once the log's end was reported
        there."""
        return max(self._handed, self._end_seen)

    def _serve(self) -> None:
        heard = time.monotonic()
        while not self._closing.is_set():
            try:
                messages = poll_batch(self._consumer, 5000, 0.1)
            except (KafkaException, RuntimeError):
                if self._closing.is_set():
                    return
                raise
            now = time.monotonic()
            if messages or self._reread_if_stalled(now - heard):
                heard = now
            for msg in messages:
                try:
                    self._on_message(msg)
                except PoisonRecordError as exc:
                    self.failure = exc
                    return
                except Exception:
                    log.exception("metadata listener failed", offset=msg.offset())
                self._handed = self.position  # only once the listener has returned

    def _on_message(self, msg: Message) -> None:
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._end_seen = cast(int, msg.offset())
                if not self.caught_up.is_set():
                    self.caught_up.set()
                    if self._on_caught_up is not None:
                        self._on_caught_up()
            else:
                log.warning("metadata fetch error", error=error.str())
            return
        offset = cast(int, msg.offset())
        raw_key = msg.key()
        if raw_key and self._wants is not None and not self._wants(raw_key):
            self.position = offset + 1
            return
        reason = None
        try:
            key, value = decode_record(raw_key, msg.value())
            rtype = record_type_of(raw_key)
            if rtype not in _ALLOWED:
                reason = f"record type {rtype.name} does not belong in this topic"
        except CodecError as exc:
            reason = str(exc)
        if reason is not None:
            # Raises in strict mode, leaving the position on the poison record.
            record_poison(self.topic, 0, offset, reason)
            self.poison += 1
            self.position = offset + 1
            return
        self.position = offset + 1
        self.records += 1
        self._on_record(Record(key, value), offset)

    def close(self) -> None:
        self._closing.set()
        close_after(self._thread, self._consumer)
