"""A deposed shard leader's late writes: fenced in the source, absent from the views.

The group shard's log is written the way the daemon writes it (LeaderEpochWriter:
a ShardLeader marker, then records tagged with the leader epoch). A zombie of
epoch 1 keeps writing after epoch 2 took over; the daemon's loader ignores those
records, and so must the Spark source and every view built on it, also when a
read starts after the markers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from kafkacoord.codecs import encode_key, encode_record
from kafkacoord.codecs.models import (
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.coordinator.runtime.epoch_writer import LeaderEpochWriter, SharedProducer
from kafkacoord.coordinator.runtime.writer import RawRecord, WriterFencedError
from kafkacoord.spark.run import RunConfig, run
from kafkacoord.spark.tables import LEADER_FENCED_REASON
from kafkacoord.spark.views import read_view

from .scenario import RETENTION_MS, cache_records, now_ms
from .support import by, create_topic, internal_topics, load_cache

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ZOMBIE = {5, 6, 7, 8}  # log offsets of the deposed leader's late writes


def marker(epoch: int) -> RawRecord:
    return encode_record(ShardLeaderKey(), ShardLeaderValue(epoch, epoch, f"n{epoch}", 1))


def write_log(bootstrap: str, offsets: str, user_topic: str, ts: int) -> None:
    """Offsets 0..9 of partition 0; the comments say which leader wrote what."""

    def commit(partition: int, offset: int) -> RawRecord:
        key = OffsetCommitKey("g", user_topic, partition)
        return encode_record(key, OffsetCommitValue(offset, f"m{offset}", ts))

    old_producer = SharedProducer(bootstrap, "spark-test-epoch1", timeout_s=20)
    new_producer = SharedProducer(bootstrap, "spark-test-epoch2", timeout_s=20)
    try:
        old = LeaderEpochWriter(old_producer, offsets, 0, epoch=1, marker=marker(1))  # 0
        assert old.write([commit(0, 5), commit(1, 6)]) == [1, 2]
        new = LeaderEpochWriter(new_producer, offsets, 0, epoch=2, marker=marker(2))  # 3
        assert new.write([commit(0, 7)]) == [4]
        # The zombie's late batch lands in the log (5, 6, 7); its writer learns it lost.
        zombie = [commit(0, 99), (encode_key(OffsetCommitKey("g", user_topic, 1)), None),
                  commit(2, 50)]  # fmt: skip
        with pytest.raises(WriterFencedError, match="leader epoch 2 took over from 1"):
            old.write(zombie)
        # A zombie restarting with its old epoch: a stale marker (8).
        LeaderEpochWriter(old_producer, offsets, 0, epoch=1, marker=marker(1)).close()
        assert new.write([commit(3, 11)]) == [9]  # the leader goes on past the noise
        new.close()
        old.close()
    finally:
        old_producer.close()
        new_producer.close()


def read_rows(spark: SparkSession, bootstrap: str, topic: str, **options: str
              ) -> dict[int, dict[str, Any]]:  # fmt: skip
    frame = (
        spark.read.format("kafkacoord")
        .option("bootstrap", bootstrap)
        .option("topics", topic)
        .options(**options)
        .load()
    )
    return {r["offset"]: r for r in frame.toArrow().to_pylist()}


def test_a_zombie_shard_leader_is_fenced_in_the_source_and_the_views(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix, offsets_partitions=1)
    user_topic = f"{prefix}orders"
    create_topic(bootstrap, user_topic, 4)
    ts = now_ms()
    write_log(bootstrap, topics.offsets, user_topic, ts)

    # The whole log: exactly the zombie's records are fenced; markers decode, no poison.
    rows = read_rows(spark, bootstrap, topics.offsets)
    assert sorted(rows) == list(range(10))
    assert {o for o, r in rows.items() if r["fenced"]} == ZOMBIE
    assert all(r["error"] is None for r in rows.values())
    assert [rows[o]["shard_leader_record"]["leader_epoch"] for o in (0, 3, 8)] == [1, 2, 1]
    assert rows[5]["offset_commit_record"]["offset"] == 99  # the zombie's value, marked
    assert rows[6]["tombstone"] and rows[6]["fenced"]

    # A read starting after the markers still knows epoch 2 is in force (the scanner).
    start = json.dumps({f"{topics.offsets}|0": 4})
    mid = read_rows(spark, bootstrap, topics.offsets, startingOffsets=start)
    assert sorted(mid) == list(range(4, 10))
    assert {o for o, r in mid.items() if r["fenced"]} == ZOMBIE
    unfenced = read_rows(spark, bootstrap, topics.offsets, startingOffsets=start, fence="false")
    assert not any(r["fenced"] for r in unfenced.values())

    # The view job, two offsets per micro-batch: most batches start mid-log.
    warehouse = tmp_path / "warehouse"
    config = RunConfig(bootstrap, warehouse, prefix=prefix, available_now=True,
                       max_records_per_batch=2, retention_ms=RETENTION_MS)  # fmt: skip
    job = run(spark, config)
    assert job.writer.batches >= 5

    view = read_view(warehouse, "group_offsets", now_ms=ts).to_pylist()
    offsets = {p: r["current_offset"] for (p,), r in by(view, "partition").items()}
    assert offsets == {0: 7, 1: 6, 3: 11}  # epoch 2's commits; key 2 only the zombie wrote

    # The daemon's cache of the same log holds the same commits.
    cache, loads = load_cache(bootstrap, topics, tmp_path / "cache", RETENTION_MS)
    try:
        assert loads[topics.offsets][0].stats.fenced == len(ZOMBIE)
        cached = {
            k.partition: v.offset
            for _, k, v in cache_records(cache, topics.offsets, 1, ts)
            if isinstance(k, OffsetCommitKey)
        }
        assert cached == offsets
    finally:
        cache.close()

    # Every zombie record is counted as fenced, none as poison.
    skipped = [r for r in read_view(warehouse, "skipped").to_pylist()
               if r["topic"] == topics.offsets]  # fmt: skip
    assert {r["kind"] for r in skipped} == {"fenced"}
    assert sum(r["records"] for r in skipped) == len(ZOMBIE)
    assert {r["last_error"] for r in skipped} == {LEADER_FENCED_REASON}
