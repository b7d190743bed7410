"""Read partitions of a topic from given offsets up to their high watermarks.

The high watermark comes from fetch responses (the partition-EOF event), never
from ListOffsets, which some brokers answer wrongly for multi-record batches.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from .clients import CONTROLLER_TRANSACTION_TIMEOUT_MS
from .errors import BrokerUnavailableError, StorageError

log = structlog.get_logger(__name__)

BEGINNING = OFFSET_BEGINNING


# How long a read may see neither records nor the end of the log before the broker counts
# as down: longer than a dead controller's open transaction holds back the end of the
# metadata log (its timeout and the broker's abort sweep), so a restart after a kill -9
# outwaits it instead of giving up.
STALL_TIMEOUT_S = CONTROLLER_TRANSACTION_TIMEOUT_MS / 1000 + 30
# How long a read may see neither records nor the end of the log before its consumer
# counts as wedged: a new one (new connections, a new fetch state) reads on.
REFETCH_AFTER_S = 10.0


class LogBehindCheckpointError(StorageError):
    """The log no longer holds the offset a checkpoint points at (truncated or recreated)."""

    def __init__(self, topic: str, partitions: Mapping[int, int]) -> None:
        detail = ", ".join(f"{topic}-{p} (log end {hw})" for p, hw in sorted(partitions.items()))
        super().__init__(f"log is behind the checkpoint for {detail}")
        self.topic = topic
        self.partitions = dict(partitions)


class ReadStalledError(StorageError):
    """A read saw neither records nor the end of the log for a while."""

    def __init__(self, topic: str, positions: Mapping[int, tuple[int, int]]) -> None:
        detail = "; ".join(f"{p}: at {at}, log end {end}" for p, (at, end) in positions.items())
        super().__init__(f"no records and no end-of-log from {topic} ({detail})")
        self.topic = topic
        self.positions = dict(positions)


@dataclass(slots=True)
class Chunk:
    """Consecutive records of one partition; ``next_offset`` follows the last one read."""

    partition: int
    messages: list[Message] = field(default_factory=list)
    next_offset: int = 0
    at_end: bool = False
    high_watermark: int | None = None


@dataclass(slots=True)
class _Progress:
    start: int
    next_offset: int
    pending: list[Message] = field(default_factory=list)
    done: bool = False
    seen: bool = False


class PartitionReader:
    """Yield chunks per partition until every partition reaches its high watermark.

    The caller owns the consumer, which must have ``enable.partition.eof`` on
    and ``auto.offset.reset=error`` so an out-of-range start is reported.
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        starts: Mapping[int, int],
        *,
        chunk_records: int = 200_000,
        stall_timeout_s: float = STALL_TIMEOUT_S,
        refetch_after_s: float = REFETCH_AFTER_S,
    ) -> None:
        self._consumer = consumer
        self.topic = topic
        self._chunk_records = chunk_records
        self._stall_timeout_s = stall_timeout_s
        self._refetch_after_s = refetch_after_s
        self._progress = {p: _Progress(o, o) for p, o in starts.items()}

    def chunks(self) -> Iterator[Chunk]:
        if not self._progress:
            return
        consumer = self._consumer
        consumer.assign([TopicPartition(self.topic, p, s.start) for p, s in self._progress.items()])
        remaining = len(self._progress)
        last_activity = time.monotonic()
        try:
            while remaining:
                batch = consumer.consume(10_000, 0.1)
                if batch:
                    last_activity = time.monotonic()
                else:
                    self._check_stalled(last_activity)
                # One partition (the metadata log) needs no lookup per message.
                only = next(iter(self._progress.values())) if len(self._progress) == 1 else None
                for msg in batch:
                    err = msg.error()
                    if err is None:
                        state = only or self._progress[cast(int, msg.partition())]
                        state.pending.append(msg)
                        state.seen = True
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        partition = cast(int, msg.partition())
                        state = self._progress[partition]
                        if not state.done:
                            state.done = True
                            remaining -= 1
                            yield self._emit(partition, at_end=True, high_watermark=msg.offset())
                        continue
                    self._on_error(msg, err)
                for partition, state in self._progress.items():
                    if len(state.pending) >= self._chunk_records:
                        yield self._emit(partition, at_end=False, high_watermark=None)
        finally:
            consumer.unassign()

    def _emit(self, partition: int, *, at_end: bool, high_watermark: int | None) -> Chunk:
        state = self._progress[partition]
        messages, state.pending = state.pending, []
        if messages:
            state.next_offset = cast(int, messages[-1].offset()) + 1
        if at_end and high_watermark is not None:
            # Compaction leaves gaps: the end of the log is the watermark, not last+1.
            state.next_offset = max(state.next_offset, high_watermark)
        return Chunk(partition, messages, state.next_offset, at_end, high_watermark)

    def _on_error(self, msg: Message, err: KafkaError) -> None:
        if (
            err.code() == KafkaError._AUTO_OFFSET_RESET
            or err.code() == KafkaError.OFFSET_OUT_OF_RANGE
        ):
            partition = cast(int, msg.partition())
            raise LogBehindCheckpointError(self.topic, {partition: self._watermark(partition)})
        if err.fatal() or not err.retriable():
            raise StorageError(f"reading {self.topic}-{msg.partition()}: {err.str()}")
        log.warning(
            "retriable read error", topic=self.topic, partition=msg.partition(), error=err.str()
        )

    def _watermark(self, partition: int) -> int:
        _, high = self._consumer.get_watermark_offsets(
            TopicPartition(self.topic, partition), cached=True
        )
        return int(high)

    def _check_stalled(self, last_activity: float) -> None:
        # Some brokers answer a fetch past the log end with no records and no
        # error: the cached high watermark then shows the start is out of range.
        behind = {}
        for partition, state in self._progress.items():
            if state.done or state.seen or state.start < 0:
                continue
            high = self._watermark(partition)
            if 0 <= high < state.start:
                behind[partition] = high
        if behind:
            raise LogBehindCheckpointError(self.topic, behind)
        silent_s = time.monotonic() - last_activity
        if silent_s < min(self._refetch_after_s, self._stall_timeout_s):
            return
        positions = self._positions()
        if silent_s > self._stall_timeout_s:
            shown = "; ".join(f"{p}: at {at}, log end {end}" for p, (at, end) in positions.items())
            raise BrokerUnavailableError(
                f"no data or end-of-log from {self.topic} partitions {sorted(positions)} "
                f"for {self._stall_timeout_s}s ({shown}); is the broker up?"
            )
        raise ReadStalledError(self.topic, positions)

    def _positions(self) -> dict[int, tuple[int, int]]:
        """Where each unfinished read stands, and the log end the broker last reported
        for it in a fetch response (-1: none yet)."""
        positions = {}
        for partition, state in self._progress.items():
            if state.done:
                continue
            at = cast(int, state.pending[-1].offset()) + 1 if state.pending else state.next_offset
            positions[partition] = (max(at, 0), max(self._watermark(partition), -1))
        return positions
