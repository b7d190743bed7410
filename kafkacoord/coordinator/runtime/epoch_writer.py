"""Pipelined appends for a group shard, fenced by the shard's leader epoch.

Kafka's own coordinator appends offset commits with plain ``acks=all`` writes and
relies on leader epochs to fence a deposed leader. This writer does the same on
top of any Kafka-compatible broker:

- Opening it appends a ``ShardLeader`` record with the leader epoch the controller
  gave this daemon; every later record carries that epoch in a header. Readers
  ignore records of a lower epoch that follow a newer ``ShardLeader``
  (:mod:`kafkacoord.storage.fencing`).
- Batches are pipelined on one idempotent producer, so the broker keeps them in
  order with no gaps or duplicates, and a batch completes without waiting for the
  ones after it. All the shards of a daemon share that producer
  (:class:`SharedProducer`), so their appends travel in the same requests.
- Before a batch is reported durable, the writer checks that nobody else wrote
  between its previous record and this batch. Only this daemon writes to the
  partition while it leads, so offsets are consecutive; a gap is read back, and
  if it holds a newer ``ShardLeader`` this process is a zombie: the batch is
  reported as fenced, never as durable, so no caller is told that a write which
  every reader ignores succeeded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import cast

import structlog
from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from kafkacoord.storage.clients import durable_producer, replay_consumer
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.fencing import epoch_headers, marker_epoch

from .writer import Delivered, RawRecord, WriterFencedError, append_error

log = structlog.get_logger(__name__)


class _Batch:
    """One batch's records, counted back by one delivery callback shared by all of them."""

    __slots__ = ("complete", "done", "error", "offsets", "remaining")

    def __init__(self, count: int, done: Delivered, complete: Callable[[_Batch], None]) -> None:
        self.offsets: list[int] = []
        self.remaining = count
        self.error: KafkaError | None = None
        self.done = done
        self.complete = complete

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        """Each record's report, on the delivery thread; the last one completes the batch."""
        if err is not None:
            self.error = self.error or err
        else:
            self.offsets.append(cast(int, msg.offset()))
        self.remaining -= 1
        if self.remaining == 0:
            self.offsets.sort()  # a partition's reports come in order; sorting makes sure
            self.complete(self)


class SharedProducer:
    """One idempotent ``acks=all`` producer and its delivery thread, for many writers.

    The processor submits the appends of every shard of a turn together
    (:mod:`.turn`). librdkafka sends one produce request per partition, and the
    broker's cost is mostly per request, so a short linger (half a millisecond)
    lets a partition's records of the next groups in flight join the same
    request: 2.7-3 records per request rather than 1.8-2 with none.
    A producer that hit a fatal error is replaced for the writers opened after it;
    the delivery thread serves the old one until every record it held is reported,
    so every batch is finished (a turn's group waits for all of its batches).
    """

    def __init__(
        self, bootstrap: str, client_id: str, *, linger_ms: float = 0.5, timeout_s: float = 30.0
    ) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._config = {"message.timeout.ms": int(timeout_s * 1000)}
        self._linger_ms = linger_ms
        self._lock = threading.Lock()
        self._producer = self._new()
        self._retired: list[Producer] = []
        self._fatal = False
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name=f"{client_id}-deliveries")
        self._poller.daemon = True
        self._poller.start()

    def _new(self) -> Producer:
        return durable_producer(
            self.bootstrap, self.client_id, linger_ms=self._linger_ms, **self._config
        )

    def producer(self) -> Producer:
        """The producer for a new writer: a fresh one if the last one failed fatally."""
        with self._lock:
            if self._fatal:
                old, self._producer, self._fatal = self._producer, self._new(), False
                self._retired.append(old)
            return self._producer

    def failed(self, error: KafkaError) -> None:
        if error.fatal():
            with self._lock:
                self._fatal = True

    def _poll(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                producer, retired = self._producer, list(self._retired)
            for old in retired:
                old.poll(0)
                if len(old) == 0:
                    with self._lock:
                        self._retired.remove(old)
            producer.poll(0.05)

    def close(self) -> None:
        self._closed.set()
        self._poller.join(5)
        for producer in [*self._retired, self._producer]:
            producer.flush(5)


class LeaderEpochWriter:
    """A group shard's pipelined writer: announces its leader epoch with a ``ShardLeader``
    record on open and tags every record with it, so readers drop a deposed leader's writes."""

    def __init__(
        self,
        shared: SharedProducer,
        topic: str,
        partition: int,
        *,
        epoch: int,
        marker: RawRecord,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.epoch = epoch
        self._shared = shared
        self._producer = shared.producer()
        self._timeout_s = shared.timeout_s
        self._headers = epoch_headers(epoch)
        self._next_offset: int | None = None  # after our last record; None until the marker
        self._failure: AppendError | None = None  # sticky: later batches fail too
        self._outstanding = 0
        self._idle = threading.Condition()
        try:
            offsets = self.write([marker])
        except AppendError:
            self.close()
            raise
        log.debug("shard leader epoch written", topic=topic, partition=partition, epoch=epoch,
                 offset=offsets[0])  # fmt: skip

    # -- appends ---------------------------------------------------------------------

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        """Append without waiting; ``done`` runs on the writer's thread, in batch order."""
        if not records:
            done([], None)
            return
        if self._failure is not None:  # fenced or broken: append nothing more
            done([], self._failure)
            return
        batch = _Batch(len(records), done, self._complete)
        with self._idle:
            self._outstanding += 1
        callback = batch.delivered
        for key, value in records:
            while True:
                try:
                    self._producer.produce(
                        self.topic, value, key, self.partition,
                        on_delivery=callback, headers=self._headers,
                    )  # fmt: skip
                    break
                except BufferError:
                    time.sleep(0.001)  # the delivery thread drains the queue

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        finished = threading.Event()
        outcome: list[tuple[list[int], AppendError | None]] = []

        def done(offsets: list[int], error: AppendError | None) -> None:
            outcome.append((offsets, error))
            finished.set()

        self.submit(records, done)
        if not finished.wait(self._timeout_s + 5):
            raise AppendError(f"append to {self.topic}-{self.partition} timed out", retriable=True)
        offsets, error = outcome[0]
        if error is not None:
            raise error
        return offsets

    def close(self) -> None:
        """Wait (briefly) for this writer's batches; the shared producer stays open."""
        with self._idle:
            self._idle.wait_for(lambda: self._outstanding == 0, timeout=5)

    # -- the delivery thread -----------------------------------------------------------

    def _complete(self, batch: _Batch) -> None:
        where = f"append to {self.topic}-{self.partition}"
        if self._failure is None and batch.error is not None:
            self._shared.failed(batch.error)
            self._failure = append_error(batch.error, where)
        if self._failure is None:
            try:
                self._check_consecutive(batch.offsets)
            except AppendError as exc:
                self._failure = exc
        if self._failure is not None:
            batch.done([], self._failure)
        else:
            batch.done(batch.offsets, None)
        with self._idle:
            self._outstanding -= 1
            self._idle.notify_all()

    def _check_consecutive(self, offsets: list[int]) -> None:
        for offset in offsets:
            if self._next_offset is not None and offset != self._next_offset:
                self._inspect_gap(self._next_offset, offset)
            self._next_offset = offset + 1

    def _inspect_gap(self, start: int, end: int) -> None:
        """Someone else appended in [start, end): fenced if it holds a newer leader."""
        if end < start:
            raise AppendError(
                f"{self.topic}-{self.partition}: offset {end} went backwards from {start}; "
                "the partition was recreated", retriable=True,
            )  # fmt: skip
        newest = self._newest_leader_epoch(start, end)
        if newest is not None and newest > self.epoch:
            raise WriterFencedError(
                f"{self.topic}-{self.partition}: leader epoch {newest} took over from "
                f"{self.epoch}", retriable=False, fatal=True,
            )  # fmt: skip
        log.warning("foreign records between appends", topic=self.topic,
                    partition=self.partition, start=start, end=end)  # fmt: skip

    def _newest_leader_epoch(self, start: int, end: int) -> int | None:
        consumer = replay_consumer(self._shared.bootstrap, f"{self._shared.client_id}-gap")
        try:
            consumer.assign([TopicPartition(self.topic, self.partition, start)])
            newest: int | None = None
            deadline = time.monotonic() + self._timeout_s
            position = start
            while position < end:
                if time.monotonic() > deadline:
                    raise AppendError(
                        f"{self.topic}-{self.partition}: could not read back offsets "
                        f"{start}..{end - 1}", retriable=True,
                    )  # fmt: skip
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                position = cast(int, msg.offset()) + 1
                if position > end:
                    break
                announced = marker_epoch(msg.key(), msg.value())
                if announced is not None:
                    newest = announced if newest is None else max(newest, announced)
            return newest
        finally:
            consumer.close()


__all__ = ["LeaderEpochWriter", "SharedProducer"]
