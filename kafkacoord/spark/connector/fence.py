"""The epoch fences of the connector pipeline, walked in read order (no shuffle, no state).

Fencing depends on log order across keys: the controller epoch in force at a
metadata record is the newest epoch of the controller records before it, and a
group shard's leader epoch rises with each admitted ``ShardLeader`` marker
(:mod:`kafkacoord.spark.source.fence`, :mod:`kafkacoord.codecs.fencing`).

Spark's Kafka source reads each Kafka partition of a micro-batch in one task, in
offset order, and ``coalesce`` concatenates those reads, so a ``mapInArrow``
right after the read meets each partition's rows as one run in log order. It
needs the epoch in force at a run's first offset, which is a function of the log
before it: each Python worker remembers where it left every partition (offset
and epoch) and, when a run does not start there (another worker read the
previous batch, a restart, a replay), scans the records in between with the
Python source's own :class:`EpochScanner`. Correctness never rests on which
worker reads what; only the cost of a scan does.

Only the rows that can move an epoch (controller records, ``ShardLeader``
markers: a handful) go through the very same ``Fence`` and ``LeaderEpochFence``
the Python source uses; every other row is compared with the epoch in force at
its offset, vectorised. The stage passes every row through, adding:

- ``fence_epoch``: the epoch in force before the row (controller epoch on
  metadata topics, shard leader epoch on offsets topics, -1 elsewhere);
- ``admitted``: the leader fence admits the row (always true off offsets topics).

Whether a metadata record is fenced needs its decoded value; the decode step
decides that from ``fence_epoch``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer

from kafkacoord.codecs import CodecError, RecordType, decode_record
from kafkacoord.codecs.fencing import LeaderEpochFence, epoch_headers
from kafkacoord.codecs.models import ControllerValue
from kafkacoord.storage.watermarks import probe_consumer

from ..source.fence import EpochScanner, Fence
from ..source.options import Role

# Rows in: the Kafka coordinates, the raw record, its record type tag (the key's first
# byte, null without one) and its epoch header (null if untagged).
STAGE_INPUT: Final = ("topic", "partition", "offset", "timestamp", "key", "value", "kind", "tag")
STAGE_OUTPUT: Final = (
    "topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
    "kind int, tag int, fence_epoch int, admitted boolean"
)
_NO_EPOCH: Final = -1


@dataclass(frozen=True)
class Mark:
    """The epoch in force at ``offset`` of one partition."""

    offset: int
    epoch: int


@dataclass
class EpochMemory:
    """Where the workers left each partition: the start and the end of its last run.

    The start serves a replayed batch (a retried task, a restart mid-batch) without a
    scan. With a ``directory`` (beside the query's checkpoint) every worker that sees
    it shares the marks, and they outlive the job; without one, they are this
    worker's. A mark only ever states a fact about the log, so a stale or missing
    one costs a scan, never a wrong verdict.
    """

    bootstrap: str
    kafka: Mapping[str, str]
    timeout_s: float
    directory: Path | None = None
    _marks: dict[tuple[str, int], tuple[Mark, ...]] = field(default_factory=dict)
    _consumer: Consumer | None = None
    _made: bool = False
    scans: int = 0

    def epoch_at(self, topic: str, partition: int, offset: int, *, leader: bool) -> int:
        """The epoch in force at ``offset``, scanning the log only if no mark is there."""
        known = self._known(topic, partition)
        for mark in known:
            if mark.offset == offset:
                return mark.epoch
        before = [m for m in known if m.offset < offset]
        start = max(before, key=lambda m: m.offset) if before else Mark(0, _NO_EPOCH)
        if start.offset == offset:
            return start.epoch  # the log's start: no epoch yet
        self.scans += 1
        scanner = EpochScanner(self.consumer(), topic, partition, self.timeout_s,
                               leader=leader, start=(start.offset, start.epoch))  # fmt: skip
        return scanner.epoch_at(offset)

    def ran(self, topic: str, partition: int, first: Mark, end: Mark) -> None:
        if self.directory is None:
            self._marks[(topic, partition)] = (first, end)
            return
        if not self._made:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._made = True
        path = self.directory / f"{topic}-{partition}"
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(f"{first.offset} {first.epoch} {end.offset} {end.epoch}\n")
        partial.replace(path)  # readers see the old marks or the new, whole

    def _known(self, topic: str, partition: int) -> tuple[Mark, ...]:
        if self.directory is None:
            return self._marks.get((topic, partition), ())
        try:
            fields = [int(f) for f in (self.directory / f"{topic}-{partition}").read_text().split()]
        except (OSError, ValueError):
            return ()  # none yet, or unreadable: the log is the truth
        if len(fields) != 4:
            return ()
        return Mark(fields[0], fields[1]), Mark(fields[2], fields[3])

    def consumer(self) -> Consumer:
        # Shared by every scan of this worker, one partition at a time.
        if self._consumer is None:
            self._consumer = probe_consumer(
                self.bootstrap,
                "kafkacoord-spark-fence",
                {"auto.offset.reset": "earliest", **self.kafka},
            )
        return self._consumer


# One per Python worker process, cluster and marks directory: Spark reuses workers
# across tasks and batches.
_memories: dict[tuple[str, tuple[tuple[str, str], ...], str | None], EpochMemory] = {}


@dataclass(frozen=True)
class ReadOrderFence:
    """The ``mapInArrow`` function: every row with its epoch and the leader fence's verdict.

    ``kafka``: librdkafka settings to scan the same cluster (its security settings);
    ``marks``: a directory the workers share the fences' marks in (see
    :class:`EpochMemory`), or ``None`` for each worker's own.
    """

    bootstrap: str
    kafka: Mapping[str, str] = field(default_factory=dict)
    marks: str | None = None
    timeout_s: float = 60.0

    def memory(self) -> EpochMemory:
        key = (self.bootstrap, tuple(sorted(self.kafka.items())), self.marks)
        if key not in _memories:
            directory = None if self.marks is None else Path(self.marks)
            _memories[key] = EpochMemory(self.bootstrap, dict(self.kafka), self.timeout_s,
                                         directory)  # fmt: skip
        return _memories[key]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        memory = self.memory()
        for batch in batches:
            if batch.num_rows:
                yield fence_batch(batch, memory)


def runs(batch: pa.RecordBatch) -> list[tuple[int, int]]:
    """[start, end) of each stretch of rows of one (topic, partition)."""
    n = batch.num_rows
    if not n:
        return []
    topics = batch.column("topic").to_numpy(zero_copy_only=False)
    partitions = batch.column("partition").to_numpy(zero_copy_only=False)
    cuts = np.flatnonzero((topics[1:] != topics[:-1]) | (partitions[1:] != partitions[:-1])) + 1
    bounds = [0, *cuts.tolist(), n]
    return list(itertools.pairwise(bounds))


def fence_batch(batch: pa.RecordBatch, memory: EpochMemory) -> pa.RecordBatch:
    pieces = []
    for start, end in runs(batch):
        rows = batch.slice(start, end - start)
        offsets = rows.column("offset").to_numpy()
        if np.any(offsets[1:] <= offsets[:-1]):
            # Not read in log order: walk it in log order all the same.
            rows = rows.take(pc.sort_indices(rows.column("offset")))
            offsets = rows.column("offset").to_numpy()
        pieces.append(_fence_run(rows, offsets, memory))
    if not pieces:
        return _with_verdicts(batch, np.empty(0, np.int32), np.empty(0, bool))
    return pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)


def _fence_run(rows: pa.RecordBatch, offsets: np.ndarray, memory: EpochMemory) -> pa.RecordBatch:
    topic, partition = rows.column("topic")[0].as_py(), rows.column("partition")[0].as_py()
    role = Role.of(topic)
    if role not in (Role.METADATA, Role.OFFSETS):
        epochs, admitted = np.full(len(rows), _NO_EPOCH, np.int32), np.ones(len(rows), bool)
    else:
        leader = role is Role.OFFSETS
        first = int(offsets[0])
        epoch = memory.epoch_at(topic, partition, first, leader=leader)
        walk = _leader if leader else _controller
        epochs, admitted, last = walk(rows, epoch)
        memory.ran(topic, partition, Mark(first, epoch), Mark(int(offsets[-1]) + 1, last))
    return _with_verdicts(rows, epochs, admitted)


def _with_verdicts(
    rows: pa.RecordBatch, epochs: np.ndarray, admitted: np.ndarray
) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [*rows.columns, pa.array(epochs, pa.int32()), pa.array(admitted, pa.bool_())],
        names=[*rows.schema.names, "fence_epoch", "admitted"],
    )


def _floats(column: pa.Array) -> np.ndarray:
    """An int column as floats, null as NaN, for vectorised comparisons."""
    floats: np.ndarray = pc.fill_null(column.cast(pa.float64()), float("nan")).to_numpy()
    return floats


def _movers(rows: pa.RecordBatch, rtype: RecordType) -> np.ndarray:
    """Positions of the rows that may move the epoch: ``rtype`` records with a value."""
    has_value = pc.is_valid(rows.column("value")).to_numpy(zero_copy_only=False)
    return np.flatnonzero((_floats(rows.column("kind")) == int(rtype)) & has_value)


def _controller(rows: pa.RecordBatch, epoch: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The controller epoch in force at each row, as the Python source's ``Fence``."""
    fence = Fence(epoch)
    epochs = np.empty(len(rows), np.int32)
    start = 0
    keys, values = rows.column("key"), rows.column("value")
    for at in _movers(rows, RecordType.CONTROLLER):
        epochs[start : at + 1] = fence.epoch
        start = at + 1
        try:
            _, decoded = decode_record(keys[at].as_py(), values[at].as_py())
        except CodecError:
            continue  # poison moves nothing
        if isinstance(decoded, ControllerValue):
            fence.admits(RecordType.CONTROLLER, {"epoch": decoded.epoch})
    epochs[start:] = fence.epoch
    return epochs, np.ones(len(rows), bool), fence.epoch


def _leader(rows: pa.RecordBatch, epoch: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The shard leader epoch at each row and the leader fence's verdict, as the loader."""
    fence = LeaderEpochFence(epoch)
    epochs = np.empty(len(rows), np.int32)
    markers = np.zeros(len(rows), bool)
    verdicts = np.ones(len(rows), bool)
    start = 0
    keys, values, tags = rows.column("key"), rows.column("value"), rows.column("tag")
    for at in _movers(rows, RecordType.SHARD_LEADER):
        epochs[start : at + 1] = fence.epoch
        start = at + 1
        markers[at] = True
        tag = tags[at].as_py()
        headers = None if tag is None else epoch_headers(tag)
        verdicts[at] = fence.admit(keys[at].as_py(), values[at].as_py(), headers)
    epochs[start:] = fence.epoch
    tagged = _floats(tags)
    # Any other record: a tag older than the epoch in force is a deposed leader's.
    admitted = np.where(markers, verdicts, np.isnan(tagged) | (tagged >= epochs))
    return epochs, admitted, fence.epoch
