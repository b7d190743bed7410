"""Durable appends of one shard's batches to its own partition.

A batch is appended as a unit and is reported durable only once every record is
acknowledged by all in-sync replicas. The transactional writer also fences
zombies: opening it with the shard's fixed ``transactional.id`` makes the broker
reject any older writer still holding that id. It appends one batch at a time;
:class:`~.epoch_writer.LeaderEpochWriter` pipelines them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from kafkacoord.storage.clients import CONTROLLER_TRANSACTION_TIMEOUT_MS, durable_producer
from kafkacoord.storage.errors import AppendError

from .shard import RawRecord

# Called once per batch with its offsets, or with the error that lost it.
Delivered = Callable[[list[int], AppendError | None], None]


class WriterFencedError(AppendError):
    """A newer writer holds this shard's transactional id: this process is a zombie."""


class ShardWriter(Protocol):
    """Where a host appends its batches: durable (``acks=all``) and in order."""

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        """Append and wait; returns each record's offset."""

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        """Append; ``done`` runs once the batch is durable or lost, in submission order."""

    def close(self) -> None: ...


class _Deliveries:
    def __init__(self, count: int) -> None:
        self.offsets: list[int] = [-1] * count
        self.error: KafkaError | None = None

    def callback(self, index: int) -> Callable[[KafkaError | None, Message], None]:
        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.error = self.error or err
            else:
                self.offsets[index] = cast(int, msg.offset())

        return delivered


def _produce_all(
    producer: Producer, topic: str, partition: int, records: Sequence[RawRecord]
) -> _Deliveries:
    deliveries = _Deliveries(len(records))
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, partition, on_delivery=deliveries.callback(i))
                break
            except BufferError:
                producer.poll(0.005)
    return deliveries


def append_error(err: KafkaError | KafkaException, where: str) -> AppendError:
    error = err.args[0] if isinstance(err, KafkaException) else err
    code = error.code() if isinstance(error, KafkaError) else None
    text = error.str() if isinstance(error, KafkaError) else str(error)
    if code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return WriterFencedError(
            f"{where}: fenced by a newer writer: {text}", retriable=False, fatal=True
        )
    fatal = isinstance(error, KafkaError) and error.fatal()
    retriable = isinstance(error, KafkaError) and error.retriable()
    return AppendError(f"{where}: {text}", retriable=retriable, fatal=fatal)


def _raise_for(err: KafkaError | KafkaException, where: str) -> None:
    raise append_error(err, where)


class TransactionalWriter:
    """Appends one shard's batches, each in its own transaction, under a fixed
    ``transactional.id``: opening it fences any older writer with that id (the controller's
    zombie fence). One batch at a time; ``submit`` reports after the commit."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        *,
        transactional_id: str,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._timeout_s = timeout_s
        self._producer = durable_producer(
            bootstrap,
            transactional_id,
            linger_ms=0,
            **{
                "transactional.id": transactional_id,
                "transaction.timeout.ms": CONTROLLER_TRANSACTION_TIMEOUT_MS,
            },
        )
        try:
            self._producer.init_transactions(timeout_s)
        except KafkaException as exc:
            _raise_for(exc, f"init transactions for {transactional_id}")

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        where = f"append to {self.topic}-{self.partition}"
        try:
            self._producer.begin_transaction()
            deliveries = _produce_all(self._producer, self.topic, self.partition, records)
            self._producer.commit_transaction(self._timeout_s)
        except KafkaException as exc:
            self._abort()
            _raise_for(exc, where)
        if deliveries.error is not None:
            _raise_for(deliveries.error, where)
        return deliveries.offsets

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        """One transaction at a time: write, then report."""
        try:
            offsets = self.write(records)
        except AppendError as exc:
            done([], exc)
            return
        done(offsets, None)

    def _abort(self) -> None:
        # A fenced or fatal producer cannot abort; the broker already did.
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(self._timeout_s)

    def close(self) -> None:
        # A fenced producer is in a fatal state: its flush can fail (confluent-kafka even
        # raises SystemError), and nothing it still holds may land anyway.
        with contextlib.suppress(KafkaException, SystemError):
            self._producer.flush(1)
