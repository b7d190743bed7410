"""Read planned offset ranges of Kafka partitions into Arrow batches (executor side).

Each range is ``[start, end)`` of one partition. A partition's range is done
at the first record at or past ``end``, or at an end-of-log at or past it:
compaction leaves gaps, so the record at ``end - 1`` may not exist. An input
partition is one range, or (with ``minRecordsPerTask``) several small ranges
read together through one consumer. Consumers and decoders are kept per
Python worker process, so a micro-batch does not pay for new connections.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from pyspark.sql.datasource import InputPartition

from kafkacoord.codecs.fencing import Headers, LeaderEpochFence
from kafkacoord.storage.clients import RECORDS_AHEAD_FETCH_WAIT_MS, base_config
from kafkacoord.storage.errors import BrokerUnavailableError, StorageError

from .columns import ColumnBuilder
from .decode import PoisonError, RecordDecoder
from .fence import Fence
from .options import Role, SourceOptions

ROWS_PER_BATCH: Final = 32_768

_consumers: dict[tuple[str, tuple[tuple[str, str], ...]], Consumer] = {}
_decoders: dict[Role, RecordDecoder] = {}


class LogBehindPlanError(StorageError):
    """The log no longer holds offsets the query checkpointed (recreated or truncated topic)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int
    # The epoch in force at ``start``: the controller epoch (metadata topics), the
    # shard leader epoch (offsets topics), -1 otherwise or with fence=false.
    fence_epoch: int = -1

    @property
    def size(self) -> int:
        return self.end - self.start


class KafkaInputPartition(InputPartition):
    """The offset ranges one Spark task reads: one Kafka partition, or several small ones."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple((r.topic, r.partition, r.start, r.end) for r in ranges))
        self.ranges = tuple(ranges)


def _consumer(options: SourceOptions) -> Consumer:
    cache_key = (options.bootstrap, tuple(sorted(options.kafka.items())))
    consumer = _consumers.get(cache_key)
    if consumer is None:
        config: dict[str, Any] = base_config(
            options.bootstrap,
            "kafkacoord-spark-reader",
            **{
                "group.id": "kafkacoord-spark-reader",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "fetch.max.bytes": 32 * 1024 * 1024,
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
                "queued.max.messages.kbytes": 64 * 1024,
                # Every range ends at or below a watermark seen: its records exist.
                "fetch.wait.max.ms": RECORDS_AHEAD_FETCH_WAIT_MS,
                **options.kafka,
            },
        )
        consumer = _consumers[cache_key] = Consumer(config)
    return consumer


def _decoder(role: Role) -> RecordDecoder:
    decoder = _decoders.get(role)
    if decoder is None:
        decoder = _decoders[role] = RecordDecoder(role.allowed)
    return decoder


class _Progress:
    """One range being read."""

    def __init__(self, options: SourceOptions, part: OffsetRange) -> None:
        role = options.role(part.topic)
        self.range = part
        self.position = part.start
        self.builder = ColumnBuilder(part.topic, part.partition, decoded=options.decode)
        self.decoder = _decoder(role) if options.decode else None
        fence = options.fence
        self.fence = Fence(part.fence_epoch) if fence and role is Role.METADATA else None
        self.leader_fence = (
            LeaderEpochFence(part.fence_epoch) if fence and role is Role.OFFSETS else None
        )

    @property
    def done(self) -> bool:
        return self.position >= self.range.end

    @property
    def left(self) -> int:
        return max(0, self.range.end - self.position)


def read_ranges(options: SourceOptions, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    progress = {(r.topic, r.partition): _Progress(options, r) for r in ranges if r.end > r.start}
    if not progress:
        return
    consumer = _consumer(options)
    consumer.assign([TopicPartition(t, p, s.position) for (t, p), s in progress.items()])
    pending = len(progress)
    progress_at = time.monotonic()
    try:
        while pending:
            left = sum(s.left for s in progress.values())
            # consume() waits for the full count or the timeout: ask for no more than is left.
            messages = consumer.consume(max(1, min(10_000, left)), 0.1)
            if not messages:
                _check_stall(consumer, progress, progress_at, options.read_timeout_s)
                continue
            progress_at = time.monotonic()
            for msg in messages:
                state = progress.get((cast(str, msg.topic()), cast(int, msg.partition())))
                if state is None or state.done:
                    continue  # read ahead past the range
                err = msg.error()
                if err is None:
                    offset = cast(int, msg.offset())
                    if offset >= state.range.end:
                        state.position = state.range.end
                    else:
                        state.position = offset + 1
                        _add(state, msg, offset)
                else:
                    _on_error(err, msg, state)
                if state.done:
                    # No pause(): librdkafka then delays the partition's next fetch by a second.
                    pending -= 1
            for state in progress.values():
                if len(state.builder) >= ROWS_PER_BATCH:
                    yield state.builder.flush()
    finally:
        consumer.unassign()
    for state in progress.values():
        if len(state.builder):
            yield state.builder.flush()


def _add(state: _Progress, msg: Message, offset: int) -> None:
    _, timestamp = msg.timestamp()
    timestamp = max(0, timestamp)
    key, value = msg.key(), msg.value()
    builder, decoder = state.builder, state.decoder
    if decoder is None:
        builder.add_raw(offset, timestamp, key, value)
        return
    # The leader fence sees every record, before decoding (as the loader): a deposed
    # leader's tombstones and poison are fenced too, and its markers never raise the fence.
    leader_fence = state.leader_fence
    admitted = leader_fence is None or leader_fence.admit(
        key, value, cast(Headers | None, msg.headers())
    )
    try:
        rtype, key_fields = decoder.key(key)
        if value is None:
            fields = key_fields
        else:
            fields = decoder.value(rtype, value)
            fields.update(key_fields)
    except PoisonError as bad:
        builder.add_poison(offset, timestamp, key, bad.reason, fenced=not admitted)
        return
    tombstone = value is None
    fence = state.fence
    fenced = not admitted or (
        fence is not None and not tombstone and not fence.admits(rtype, fields)
    )
    builder.add_record(offset, timestamp, key, rtype, fields, tombstone=tombstone, fenced=fenced)


def _on_error(err: KafkaError, msg: Message, state: _Progress) -> None:
    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        # Past a gap at the tail of the range, the end-of-log is the end of the range.
        if cast(int, msg.offset()) >= state.range.end:
            state.position = state.range.end
        return
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        raise LogBehindPlanError(_behind_message(state))
    if err.fatal() or not err.retriable():
        raise BrokerUnavailableError(
            f"reading {state.range.topic}-{state.range.partition}: {err.str()}"
        )


def _check_stall(
    consumer: Consumer,
    progress: dict[tuple[str, int], _Progress],
    progress_at: float,
    timeout_s: float,
) -> None:
    idle = time.monotonic() - progress_at
    if idle < 1.0:
        return  # the cached watermark may predate this assignment's first fetch
    for state in progress.values():
        if state.done:
            continue
        # The embedded broker answers a fetch past the log end with nothing at all.
        _, high = consumer.get_watermark_offsets(
            TopicPartition(state.range.topic, state.range.partition), cached=True
        )
        if 0 <= high < state.position:
            raise LogBehindPlanError(_behind_message(state))
    if idle > timeout_s:
        waiting = [f"{s.range.topic}-{s.range.partition}@{s.position}"
                   for s in progress.values() if not s.done]  # fmt: skip
        # Keep the message short: Spark matches error messages with a recursive regex.
        shown = ", ".join(waiting[:3]) + (
            f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""
        )
        raise BrokerUnavailableError(f"no records from {shown} for {timeout_s}s; is the broker up?")


def _behind_message(state: _Progress) -> str:
    r = state.range
    return (
        f"{r.topic}-{r.partition} has no offset {state.position} any more (the query planned "
        f"{r.start}..{r.end}): the topic was recreated or truncated. Delete the query's "
        "checkpoint and its warehouse to rebuild the views from the new log"
    )


def pack(ranges: Sequence[OffsetRange], min_records: int) -> list[list[OffsetRange]]:
    """Group ranges into tasks: one per range, except small ranges share up to ``min_records``.

    Spark pays tens of milliseconds per task, so fifty partitions with a few
    new records each are read faster by one task with one consumer. A range is
    never split, so each partition is still read in order by one task.
    """
    tasks: list[list[OffsetRange]] = []
    current: list[OffsetRange] = []
    total = 0
    for r in ranges:
        if r.size >= min_records or min_records <= 0:
            tasks.append([r])
            continue
        if current and total + r.size > min_records:
            tasks.append(current)
            current, total = [], 0
        current.append(r)
        total += r.size
    if current:
        tasks.append(current)
    return tasks
