"""The driver side of the source: offsets, admission control and planning.

Spark keeps this object alive in one Python process for the whole query, so
it holds the probe's connections and the last end offsets seen. Nothing here
is needed for correctness after a restart: the checkpointed offsets are the
truth (``commit`` arrives a batch late and ``stop`` may never be called).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kafkacoord.storage.watermarks import EndOffsetProbe, probe_consumer

from .fence import EpochScanner
from .offsets import (
    OffsetFormatError,
    Offsets,
    TopicPartition,
    admit,
    from_json,
    parse_starting,
    to_json,
)
from .options import Role, SourceOptions
from .read import KafkaInputPartition, OffsetRange, pack, read_ranges


class _Planner:
    """Offsets and input partitions of the configured topics."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._probe: EndOffsetProbe | None = None
        self._scanners: dict[TopicPartition, EpochScanner] = {}
        self.known_ends: Offsets = {}

    @property
    def probe(self) -> EndOffsetProbe:
        if self._probe is None:
            self._probe = EndOffsetProbe(
                self.options.bootstrap, client_id="kafkacoord-spark", kafka=self.options.kafka
            )
        return self._probe

    def topic_partitions(self) -> list[TopicPartition]:
        return self.probe.partitions(self.options.topics)

    def latest(self, tps: Sequence[TopicPartition]) -> Offsets:
        ends = self.probe.latest(tps, hints=self.known_ends)
        self.known_ends.update(ends)
        return ends

    def starting(self, spec: str) -> Offsets:
        tps = self.topic_partitions()
        parsed = parse_starting(spec)
        if parsed == "latest":
            return self.latest(tps)
        earliest = self.probe.earliest(tps)
        if parsed == "earliest":
            return earliest
        assert isinstance(parsed, dict)
        unknown = sorted(set(parsed) - set(earliest))
        if unknown:
            raise OffsetFormatError(
                f"startingOffsets names partitions that do not exist: {unknown}"
            )
        return {tp: parsed.get(tp, earliest[tp]) for tp in tps}

    def plan(self, start: Offsets, end: Offsets) -> list[KafkaInputPartition]:
        ranges = []
        for (topic, partition), stop in sorted(end.items()):
            begin = start.get((topic, partition), 0)
            if stop > begin:
                epoch = self._fence_epoch(topic, partition, begin)
                ranges.append(OffsetRange(topic, partition, begin, stop, epoch))
        tasks = pack(ranges, self.options.min_records_per_task)
        return [KafkaInputPartition(task) for task in tasks]

    def _fence_epoch(self, topic: str, partition: int, offset: int) -> int:
        """The epoch in force at ``offset``: controller (metadata) or shard leader (offsets)."""
        role = self.options.role(topic)
        if not (self.options.fence and role in (Role.METADATA, Role.OFFSETS)):
            return -1
        scanner = self._scanners.get((topic, partition))
        if scanner is None:
            consumer = probe_consumer(
                self.options.bootstrap,
                "kafkacoord-spark-fence",
                {"auto.offset.reset": "earliest", **self.options.kafka},
            )
            scanner = EpochScanner(consumer, topic, partition, self.options.read_timeout_s,
                                   leader=role is Role.OFFSETS)  # fmt: skip
            self._scanners[(topic, partition)] = scanner
        return scanner.epoch_at(offset)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        for scanner in self._scanners.values():
            scanner.close()
        self._scanners.clear()


class KafkacoordStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner = _Planner(options)
        self._target: Offsets | None = None

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's name)
        return to_json(self._planner.starting(self.options.starting_offsets))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        limit = self.options.max_records_per_batch
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        # The target is fixed now: records appended later wait for the next run.
        self._target = self._planner.latest(self._planner.topic_partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        begin = from_json(start)
        if self._target is not None:
            latest = self._target
        else:
            latest = self._planner.latest(self._planner.topic_partitions())
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return to_json(admit(begin, latest, max_rows))

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802
        ends = self._planner.known_ends
        return to_json(ends) if ends else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._planner.plan(from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_ranges(self.options, partition.ranges)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        self._planner.close()


class KafkacoordBatchReader(DataSourceReader):
    """``spark.read``: from ``startingOffsets`` to ``endingOffsets`` (default: latest)."""

    def __init__(self, options: SourceOptions, ending: str) -> None:
        self.options = options
        self._ending = ending

    def partitions(self) -> Sequence[InputPartition]:
        planner = _Planner(self.options)
        try:
            start = planner.starting(self.options.starting_offsets)
            end = planner.starting(self._ending)
            return planner.plan(start, end)
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_ranges(self.options, partition.ranges)
