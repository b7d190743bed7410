"""Spark's Kafka connector and spark-avro against the Python source: the same rows, the same views.

Both sources read one log holding everything the fences and the decoder must
get right (``mixed_log``): every row the connector pipeline yields equals the
Python source's, field for field, poison reasons included; and the view job
builds identical views from either, also when micro-batches split the log so
the fence state must carry from one batch to the next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from kafkacoord.codecs import encode_key
from kafkacoord.codecs.models import NodeKey
from kafkacoord.spark.connector.fence import EpochMemory, fence_batch
from kafkacoord.spark.connector.source import ConnectorOptions, connector_source
from kafkacoord.spark.run import RunConfig, Source, run
from kafkacoord.spark.views import VIEWS, read_view

from .mixed_log import Tagged, bool_of_two, build_mixed, write_mixed, write_records
from .scenario import OFFSETS_PARTITIONS, RETENTION_MS, now_ms
from .support import internal_topics

pytestmark = [pytest.mark.spark, pytest.mark.integration]

Row = dict[str, Any]
# The tail of each topic written after the connector's first run: on shard 0 it starts
# after the ShardLeader marker of epoch 2, so the fence state must survive the restart.
HALF_OF_THE_EXTRAS: Final = 11


def collect(frame: DataFrame, checkpoint: Path) -> dict[tuple[str, int, int], Row]:
    """Every row of an available-now stream, by (topic, partition, offset)."""
    batches: list[pa.Table] = []
    query = (
        frame.writeStream.foreachBatch(lambda df, _: batches.append(df.toArrow()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert not query.isActive
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    rows = pa.concat_tables(batches).to_pylist() if batches else []
    found = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    assert len(found) == len(rows)  # each record once
    return found


# Burrow's verdicts also weigh the log end offsets sampled at each run's own wall-clock
# time, which no source decides; the rest of lag_status (offsets, lag, window) is compared.
SAMPLED: Final = {
    "lag_status": ("status", "group_worst", "group_status"),
    "log_end_offsets": ("sampled_at",),
    "lag_history": ("time",),
}
# A job run twice (the connector's) may sample into two buckets: the newest is compared.
NEWEST: Final = {"lag_history": ("group", "topic", "partition", "coordinator_shard")}


def views(warehouse: Path, now: int) -> dict[str, list[Row]]:
    def key(row: Row) -> str:
        return repr(sorted(row.items()))

    found = {}
    for name in VIEWS:
        rows = read_view(warehouse, name, now_ms=now).to_pylist()
        if name in NEWEST:  # sorted by time: later rows win
            rows = list({tuple(r[f] for f in NEWEST[name]): r for r in rows}.values())
        rows = [{k: v for k, v in r.items() if k not in SAMPLED.get(name, ())} for r in rows]
        found[name] = sorted(rows, key=key)
    return found


def test_the_connector_yields_the_python_sources_rows(
    connector: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    log = build_mixed(topics, f"{prefix}orders", now_ms())
    write_mixed(bootstrap, log)

    python = connector.readStream.format("kafkacoord").option("bootstrap", bootstrap)
    expected = collect(python.option("prefix", prefix).load(), tmp_path / "python")
    options = ConnectorOptions(bootstrap, prefix, max_records_per_batch=11)
    got = collect(connector_source(connector, options), tmp_path / "connector")

    assert len(expected) == len(log.metadata) + len(log.offsets)
    assert set(got) == set(expected)
    for position, row in expected.items():
        assert got[position] == row, position
    # The log holds what it is meant to: every rule was exercised.
    assert sum(1 for r in expected.values() if r["error"]) >= 15
    assert sum(1 for r in expected.values() if r["fenced"]) >= 8
    assert sum(1 for r in expected.values() if r["tombstone"]) >= 8


def test_both_sources_build_the_same_views(
    connector: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    """The connector's job stops halfway (mid-leadership on shard 0) and resumes."""
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    now = now_ms()
    log = build_mixed(topics, f"{prefix}orders", now)

    def config(source: Source, interpreted: bool | None = None) -> RunConfig:
        return RunConfig(bootstrap, tmp_path / source.value, prefix=prefix, available_now=True,
                         max_records_per_batch=13, retention_ms=RETENTION_MS,
                         source=source, interpreted=interpreted)  # fmt: skip

    half = -HALF_OF_THE_EXTRAS
    write_mixed(bootstrap, log, slice(None, half))
    # The first half interpreted, as a running job folds; the rest compiled.
    first = run(connector, config(Source.CONNECTOR, interpreted=True))
    write_mixed(bootstrap, log, slice(half, None))
    second = run(connector, config(Source.CONNECTOR))
    assert first.writer.batches >= 5 and second.writer.batches >= 1
    job = run(connector, config(Source.PYTHON))
    assert job.writer.batches >= 5

    python, spark_kafka = views(tmp_path / "python", now), views(tmp_path / "connector", now)
    for name in VIEWS:
        assert spark_kafka[name] == python[name], name
    assert python["skipped"] and python["leadership_history"] and python["group_offsets"]
    assert python["lag_history"]


def test_a_record_spark_avro_reads_otherwise_stops_the_connector_with_the_reason(
    connector: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    """A boolean byte of 2: the codecs read True, spark-avro false. Nothing is guessed."""
    topics = internal_topics(bootstrap, prefix, 1)
    write_records(bootstrap, topics.metadata, [(0, encode_key(NodeKey(9)), bool_of_two(1), None)])
    python = connector.readStream.format("kafkacoord").option("bootstrap", bootstrap)
    rows = collect(python.option("prefix", prefix).load(), tmp_path / "python")
    assert [r["node_record"]["fenced"] for r in rows.values()] == [True]

    with pytest.raises(Exception, match="spark-avro rejects a record the codecs decode"):
        collect(connector_source(connector, ConnectorOptions(bootstrap, prefix)),
                tmp_path / "connector")  # fmt: skip


def stage_rows(topic: str, partition: int, records: list[Tagged]) -> pa.RecordBatch:
    """One partition's records as the read hands them to the fence, from offset 0."""
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([topic] * len(records), pa.string()),
            "partition": pa.array([partition] * len(records), pa.int32()),
            "offset": pa.array(range(len(records)), pa.int64()),
            "key": pa.array([k for _, k, _, _ in records], pa.binary()),
            "value": pa.array([v for _, _, v, _ in records], pa.binary()),
            "kind": pa.array([k[0] if k else None for _, k, _, _ in records], pa.int32()),
            "tag": pa.array([t for _, _, _, t in records], pa.int32()),
        }
    )


def test_a_worker_that_meets_a_partition_mid_log_reads_the_epoch_from_the_log(
    bootstrap: str, prefix: str
) -> None:
    """Another worker read the batches before, or the job restarted: the fence scans
    the log up to the run (or from where this worker left it) and gives the verdicts
    of a walk from offset 0."""
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    log = build_mixed(topics, f"{prefix}orders", now_ms())
    write_mixed(bootstrap, log)
    verdict = ("fence_epoch", "admitted")
    epochs_seen: set[int] = set()
    for topic, records in ((topics.metadata, log.metadata), (topics.offsets, log.offsets)):
        for partition in sorted({r[0] for r in records}):
            rows = stage_rows(topic, partition, [r for r in records if r[0] == partition])
            n = rows.num_rows
            whole = fence_batch(rows, EpochMemory(bootstrap, {}, 30.0)).select(verdict)
            for cut in sorted({1, n // 2, n - 1}):
                fresh = EpochMemory(bootstrap, {}, 30.0)
                tail = fence_batch(rows.slice(cut), fresh).select(verdict)
                assert tail.equals(whole.slice(cut)), (topic, partition, cut)
                assert fresh.scans == 1
                epochs_seen.update(tail.column("fence_epoch").to_pylist())
            # A worker that read the start and meets the partition again two thirds on
            # scans only the records in between.
            worker = EpochMemory(bootstrap, {}, 30.0)
            fence_batch(rows.slice(0, n // 3), worker)
            later = fence_batch(rows.slice(2 * n // 3), worker).select(verdict)
            assert later.equals(whole.slice(2 * n // 3)), (topic, partition)
            assert worker.scans == 1
    assert len(epochs_seen - {-1}) >= 2  # the cuts fell after epochs moved
