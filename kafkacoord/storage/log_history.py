"""A partition's log as history: its records in order, each with its offset and time.

For answers "as of" an instant: the state then is what the records appended up to
that instant fold into. The read stops at the first record stamped after the instant
(a log's prefix, so a later record from a clock running behind is not taken out of
order) or at the high watermark seen when the read began. Transactions are read
committed, as every replay of the internal topics is. A read of an offsets partition
asks for its leader-epoch fence, so a fenced shard leader's late appends are left out
as the daemons leave them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, Message

from kafkacoord.codecs import CodecError, RecordType, decode_record, record_type_of
from kafkacoord.codecs.fencing import Headers, LeaderEpochFence
from kafkacoord.codecs.models import AvroModel

from .clients import PATIENT_FETCH_WAITS_MS, replay_consumer
from .reader import BEGINNING, PartitionReader, ReadStalledError

__all__ = ["LogRead", "LoggedRecord", "read_log"]

KeyFilter = Callable[[bytes], bool]


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    offset: int
    timestamp_ms: int
    key: AvroModel
    value: AvroModel | None  # None: a tombstone


@dataclass(slots=True)
class LogRead:
    """What one read saw: the records kept, where it stopped, and what it skipped."""

    records: list[LoggedRecord]
    first_timestamp_ms: int | None  # the oldest record still in the log, if any was read
    next_offset: int
    undecodable: int = 0
    first_offset: int | None = None  # that record's offset: 0 if nothing before it is gone
    fenced: int = 0  # records of a fenced shard leader, left out


def read_log(
    bootstrap: str,
    topic: str,
    partition: int = 0,
    *,
    until_ms: int | None = None,
    wants: KeyFilter | None = None,
    allowed: frozenset[RecordType] | None = None,
    client_id: str = "kafkacoord-history",
    leader_fenced: bool = False,
) -> LogRead:
    """Read ``topic``-``partition`` from its start; keep the records ``wants`` (by raw
    key) whose type is ``allowed``, up to the first stamped after ``until_ms``. Records
    that do not decode are counted, not kept: a history read never stops on them.
    ``leader_fenced``: drop records a newer ``ShardLeader`` fenced (an offsets
    partition), as the daemons' replay does."""
    read = LogRead([], None, 0)
    # Sees every record, the ShardLeader markers ``wants`` may leave out included.
    fence = LeaderEpochFence() if leader_fenced else None
    for fetch_wait_ms in (None, *PATIENT_FETCH_WAITS_MS):
        consumer = replay_consumer(
            bootstrap, client_id, fetch_wait_ms=fetch_wait_ms,
            **{"isolation.level": "read_committed"},
        )  # fmt: skip
        try:
            for message in _messages(consumer, topic, partition, read.next_offset or BEGINNING):
                offset, (_, timestamp_ms) = cast(int, message.offset()), message.timestamp()
                if read.first_timestamp_ms is None:
                    read.first_timestamp_ms, read.first_offset = timestamp_ms, offset
                if until_ms is not None and timestamp_ms > until_ms:
                    return read
                read.next_offset = offset + 1
                raw_key = message.key()
                if fence is not None and not fence.admit(
                    raw_key, message.value(), cast(Headers | None, message.headers())
                ):
                    read.fenced += 1
                    continue
                if not raw_key or (wants is not None and not wants(raw_key)):
                    continue
                try:
                    if allowed is not None and record_type_of(raw_key) not in allowed:
                        continue
                    key, value = decode_record(raw_key, message.value())
                except CodecError:
                    read.undecodable += 1
                    continue
                read.records.append(LoggedRecord(offset, timestamp_ms, key, value))
            return read
        except ReadStalledError:
            continue  # read on from where this one stopped, with a longer fetch wait
        finally:
            consumer.close()
    raise ReadStalledError(topic, {partition: (read.next_offset, -1)})


def _messages(consumer: Consumer, topic: str, partition: int, start: int) -> Iterator[Message]:
    reader = PartitionReader(consumer, topic, {partition: start})
    for chunk in reader.chunks():
        yield from chunk.messages
