"""Epoch fencing of the internal topics, exactly as the daemon's loader applies it.

Metadata topics, controller epochs (docs/architecture.md#controller-epoch): a decision whose
``controller_epoch`` is lower than the newest controller epoch seen earlier in
the log is a stale controller's late write: skipped. Controller records of a
lower epoch are skipped too. Tombstones always apply.

Offsets topics, leader epochs (:mod:`kafkacoord.codecs.fencing`): a record
whose ``kc.epoch`` header is below the newest ``ShardLeader`` announced earlier
in its partition is a deposed shard leader's late write, and so is a
``ShardLeader`` announcing an older epoch. The header decides, so a zombie's
tombstones are skipped too (the loader drops them before decoding).

A read starts mid-log, so it needs the epoch in force at its first offset:
:class:`EpochScanner` (on the driver) reads the records before it,
incrementally, since batches move forward.
"""

from __future__ import annotations

import time
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from kafkacoord.codecs import CodecError, RecordType, decode_record
from kafkacoord.codecs.fencing import ControllerEpochFence, Headers, LeaderEpochFence
from kafkacoord.codecs.models import ControllerValue
from kafkacoord.storage.errors import BrokerUnavailableError


class Fence(ControllerEpochFence):
    """The running controller epoch of one metadata partition, over decoded columns."""

    __slots__ = ()

    def admits(self, rtype: RecordType, fields: dict[str, Any]) -> bool:
        if rtype is RecordType.CONTROLLER:
            return self.admit_epoch(int(fields["epoch"]), announces=True)
        stamped = fields.get("controller_epoch")
        return self.admit_epoch(None if stamped is None else int(stamped))


class EpochScanner:
    """The fence epoch at any offset of an internal partition, scanning forward only.

    ``leader=False``: the controller epoch of a metadata partition; ``leader=True``:
    the leader epoch of a group shard (an offsets partition).
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        partition: int,
        timeout_s: float,
        *,
        leader: bool = False,
        start: tuple[int, int] = (0, -1),
    ) -> None:
        """``start``: (offset, epoch) known to be in force there, so a scan begins at it."""
        self._consumer = consumer
        self._topic = topic
        self._partition = partition
        self._timeout_s = timeout_s
        self._new_fence: type[Fence | LeaderEpochFence] = LeaderEpochFence if leader else Fence
        self._scanned_to = start[0]
        self._fence = self._new_fence(start[1])

    def epoch_at(self, offset: int) -> int:
        """The fence epoch in force for the record at ``offset`` (from records before it)."""
        if offset < self._scanned_to:
            self._scanned_to, self._fence = 0, self._new_fence()
        if offset > self._scanned_to:
            self._scan(offset)
        return self._fence.epoch

    def _scan(self, end: int) -> None:
        consumer = self._consumer
        consumer.assign([TopicPartition(self._topic, self._partition, self._scanned_to)])
        deadline = time.monotonic() + self._timeout_s
        position = self._scanned_to
        try:
            while position < end:
                if time.monotonic() > deadline:
                    raise BrokerUnavailableError(
                        f"scanning {self._topic}-{self._partition} for fence epochs stalled "
                        f"at offset {position} (wanted {end})"
                    )
                for msg in consumer.consume(max(1, min(10_000, end - position)), 0.1):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            # A compaction gap at the tail: the end is where the log ends.
                            position = max(position, min(end, cast(int, msg.offset())))
                        continue
                    offset = cast(int, msg.offset())
                    if offset >= end:
                        position = end
                        break
                    position = offset + 1
                    self._observe(msg)
        finally:
            consumer.unassign()
        self._scanned_to = end

    def _observe(self, msg: Message) -> None:
        key, value, fence = msg.key(), msg.value(), self._fence
        if isinstance(fence, LeaderEpochFence):
            # Every record: a stale header also rejects a marker (as the loader).
            fence.admit(key, value, cast(Headers | None, msg.headers()))
            return
        if not key or key[0] != RecordType.CONTROLLER or value is None:
            return
        try:
            _, decoded = decode_record(key, value)
        except CodecError:
            return  # poison is skipped by the read as well
        if isinstance(decoded, ControllerValue):
            fence.admits(RecordType.CONTROLLER, {"epoch": decoded.epoch})

    def close(self) -> None:
        self._consumer.close()
