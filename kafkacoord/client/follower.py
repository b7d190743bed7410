"""Tails ``__kc_metadata`` from the start and hands every decoded record over, in order.

The first partition-EOF marks "caught up": everything up to the high watermark
has been seen, so a listener can act on the final state instead of on history.
Poison records (undecodable, or of a type that does not belong in the metadata
topic) are counted and skipped; in strict mode the follower stops at the first.

A broker that comes back after losing its connections may hold another log: the
embedded broker restarts empty and is re-seeded, with each key's latest record at new
offsets. Read on at the old position, that log would skip what was re-seeded below it
and whatever the new controller wrote there. So once the connection breaks, nothing
more is handed over until the last record handed over is read again, at its offset
and with its bytes and timestamp; if it is not there, the log is read again from its
start (a listener then sees each key's latest record again, as after compaction).
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
from kafkacoord.storage.watermarks import probe_consumer

log = structlog.get_logger(__name__)

OnRecord = Callable[[Record, int], object]
# Which raw keys a listener wants; the others are skipped before anything is decoded.
KeyFilter = Callable[[bytes], bool]

_ALLOWED = metadata_policy().allowed
# librdkafka's signs that the connection to the log broke (see the module docstring).
_CONNECTION_LOST = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT})
# How long one check of the last record waits for the broker before trying again later.
_CHECK_S = 5.0
# The last record handed over: offset, key, value and timestamp.
_Seen = tuple[int, bytes | None, bytes | None, int]


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
        self._lost = False  # the connection broke since the log was last known the same
        self._seen: _Seen | None = None
        self.checks = 0  # times the last record was read again after a broken connection
        self.replaced = 0  # times the log was found replaced and read again from its start
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
                    "error_cb": self._on_error,
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

    def _on_error(self, error: KafkaError) -> None:
        # Called on this follower's thread, inside the poll that met the error, and
        # before any message fetched over a new connection is returned.
        if error.code() in _CONNECTION_LOST:
            self._lost = True

    def _seek(self, offset: int) -> None:
        self._consumer.seek(TopicPartition(self.topic, 0, offset))

    def _check_same_log(self) -> None:
        """Read the last record handed over again; read the log from its start if it is
        gone (see the module docstring). Without an answer, check again later."""
        self.checks += 1
        seen = self._seen
        if seen is not None:
            same = self._still_there(seen)
            if same is None:
                self._lost = True
                return
            if not same:
                self._forget(seen[0])
        self._seek(self.position)

    def _still_there(self, seen: _Seen) -> bool | None:
        """Whether the log holds ``seen`` at its offset; None if the broker did not say.
        A probe of its own reads it, with a fetch wait that finds it on a long log."""
        offset = seen[0]
        probe = probe_consumer(self._bootstrap, f"{self._client_id}-check",
                               {"isolation.level": "read_committed"})  # fmt: skip
        try:
            probe.assign([TopicPartition(self.topic, 0, offset)])
            started = time.monotonic()
            rewound = False
            while not self._closing.is_set() and time.monotonic() - started < _CHECK_S:
                msg = probe.poll(0.2)
                if msg is None:
                    # tansu answers a fetch past its log with nothing, and its listed end
                    # may fall short of the true end: so a listed end at or before the
                    # offset proves nothing. Read up to the offset from a record it lists.
                    if not rewound and time.monotonic() - started > 1:
                        end = _listed_end(probe, self.topic)
                        if 0 <= end <= offset:
                            rewound = True
                            probe.assign([TopicPartition(self.topic, 0, max(end - 1, 0))])
                    continue
                error = msg.error()
                if error is None:
                    if cast(int, msg.offset()) < offset:
                        continue  # read from before it, after a rewind
                    return _seen(msg) == seen
                if error.code() == KafkaError._PARTITION_EOF:
                    return False  # nothing visible at the offset: ended before, or aborted
            return None
        finally:
            probe.close()

    def _forget(self, was_at: int) -> None:
        """The log was replaced: read it from its start."""
        self.replaced += 1
        log.warning("metadata log replaced: its broker came back with another log; "
                    "reading it again from the start", topic=self.topic, was_at=was_at)  # fmt: skip
        self.position = self._handed = 0
        self._end_seen = -1
        self._seen = None

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
            if self._lost:
                # Handed over only once the log is known to be the same one; re-read then.
                self._lost = False
                self._check_same_log()
                heard = now
                continue
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
            for msg in reversed(messages):  # the last record, usually just before an EOF
                if msg.error() is None:
                    self._seen = _seen(msg)
                    break

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
        if offset < self.position:
            # librdkafka reset to the start of a log that came back shorter.
            self._forget(self.position)
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


def _listed_end(consumer: Consumer, topic: str) -> int:
    """The partition's end as ListOffsets answers it; -1 if the broker does not answer."""
    try:
        high: int = consumer.get_watermark_offsets(TopicPartition(topic, 0), 1.0, False)[1]
        return high
    except KafkaException:
        return -1


def _seen(msg: Message) -> _Seen:
    return cast(int, msg.offset()), msg.key(), msg.value(), msg.timestamp()[1]
