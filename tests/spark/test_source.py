"""The kafkacoord data source against a real broker: decoding, offsets, limits, end offsets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    GroupMetadataKey,
    GroupMetadataValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
)
from kafkacoord.storage.watermarks import EndOffsetProbe

from .support import append, create_topic, internal_topics, produce_batched, record

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def stream(
    spark: SparkSession, options: dict[str, str], checkpoint: Path
) -> tuple[list[pa.Table], list[dict[str, Any]]]:
    """Run an available-now query; the record batches it saw, and its progress reports."""
    batches: list[pa.Table] = []
    query = (
        spark.readStream.format("kafkacoord")
        .options(**options)
        .load()
        .writeStream.foreachBatch(lambda df, _: batches.append(df.toArrow()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive
    return batches, query.recentProgress


def positions(batches: list[pa.Table]) -> list[tuple[str, int, int]]:
    rows = pa.concat_tables(batches).select(["topic", "partition", "offset"]).to_pylist()
    return [(r["topic"], r["partition"], r["offset"]) for r in rows]


def partition_value(leader: int, epoch: int, controller_epoch: int) -> PartitionValue:
    return PartitionValue("orders", 0, PartitionState.ONLINE, (1, 2), (1, 2), leader, epoch,
                          epoch, 100 + epoch, controller_epoch)  # fmt: skip


def test_decoded_stream_reads_each_record_once_in_limited_batches(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix)
    metadata = [
        record(ControllerKey(), ControllerValue(1, 1, "a", 10)),
        record(NodeKey(1), NodeValue(1, "i", 1, False, 10, 1, rack="r1")),
        record(PartitionKey("orders", 0), partition_value(1, 0, 1)),
        record(ControllerKey(), ControllerValue(2, 2, "b", 20)),
        record(PartitionKey("orders", 0), partition_value(2, 1, 2)),
        record(PartitionKey("orders", 0), partition_value(1, 2, 1)),  # stale controller: fenced
        record(NodeKey(9), None),  # tombstone
    ]
    offsets = [
        record(OffsetCommitKey("g", "orders", i % 4), OffsetCommitValue(i, "m", 1_000 + i), i % 3)
        for i in range(30)
    ]
    offsets += [
        (0, b"\x63garbage", b"zz"),  # unknown record type
        (1, offsets[1][1], b"\x00\x02\x00"),  # a good key with an undecodable value
        record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, 5, (), "range"), 2),
    ]
    append(bootstrap, topics.metadata, metadata)
    append(bootstrap, topics.offsets, offsets)

    options = {"bootstrap": bootstrap, "prefix": prefix, "maxRecordsPerBatch": "7"}
    batches, progress = stream(spark, options, tmp_path / "ckpt")

    seen = positions(batches)
    expected = [(topics.metadata, 0, o) for o in range(len(metadata))]
    for p in range(3):
        count = sum(1 for r in offsets if r[0] == p)
        expected += [(topics.offsets, p, o) for o in range(count)]
    assert sorted(seen) == sorted(expected)  # every record exactly once
    assert all(b.num_rows <= 7 for b in batches) and len(batches) >= 6
    final = json.loads(progress[-1]["sources"][0]["endOffset"])
    assert final == {
        f"{topics.metadata}|0": len(metadata),
        **{f"{topics.offsets}|{p}": sum(1 for r in offsets if r[0] == p) for p in range(3)},
    }

    rows = pa.concat_tables(batches).to_pylist()
    at = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    stale = at[(topics.metadata, 0, 5)]
    assert stale["fenced"] and stale["partition_record"]["controller_epoch"] == 1
    assert not at[(topics.metadata, 0, 4)]["fenced"]
    tombstone = at[(topics.metadata, 0, 6)]
    assert tombstone["tombstone"] and tombstone["record_type"] == "NODE"
    assert tombstone["node_record"]["node_id"] == 9 and tombstone["node_record"]["rack"] is None
    poison = [r for r in rows if r["error"] is not None]
    assert len(poison) == 2 and all(r["record_type"] is None for r in poison)
    assert any("unknown record type" in r["error"] for r in poison)
    commit = next(r for r in rows if r["record_type"] == "OFFSET_COMMIT" and r["offset"] == 0
                  and r["partition"] == 0)  # fmt: skip
    assert commit["offset_commit_record"] == {
        "group": "g", "topic": "orders", "partition": 0, "offset": 0, "leader_epoch": -1,
        "metadata": "m", "commit_timestamp_ms": 1_000, "expire_timestamp_ms": None,
    }  # fmt: skip
    group = next(r for r in rows if r["record_type"] == "GROUP_METADATA")
    assert group["group_metadata_record"]["protocol"] == "range"


def test_raw_mode_starting_offsets_and_restart(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topic = f"{prefix}events"
    create_topic(bootstrap, topic, 2)
    append(bootstrap, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(10)])
    options = {
        "bootstrap": bootstrap,
        "topics": topic,
        "decode": "none",
        "startingOffsets": json.dumps({f"{topic}|0": 3}),
    }
    batches, _ = stream(spark, options, tmp_path / "json")
    rows = pa.concat_tables(batches).to_pylist()
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4)
    ]  # fmt: skip
    assert {r["value"] for r in rows if r["partition"] == 0} == {b"v6", b"v8"}
    assert set(pa.concat_tables(batches).column_names) == {
        "topic", "partition", "offset", "timestamp", "key", "value"
    }  # fmt: skip

    # "latest" starts at the end; a restart from the checkpoint resumes exactly there.
    latest = {**options, "startingOffsets": "latest"}
    first, _ = stream(spark, latest, tmp_path / "latest")
    assert sum(b.num_rows for b in first) == 0
    append(bootstrap, topic, [(1, b"k", b"new1"), (0, b"k", b"new2")])
    second, _ = stream(spark, latest, tmp_path / "latest")
    assert sorted(r["value"] for b in second for r in b.to_pylist()) == [b"new1", b"new2"]
    third, _ = stream(spark, latest, tmp_path / "latest")
    assert sum(b.num_rows for b in third) == 0


def test_end_offsets_come_from_fetching_not_list_offsets(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topic = f"{prefix}batched"
    create_topic(bootstrap, topic, 2)
    produce_batched(bootstrap, topic, 0, [f"v{i}".encode() for i in range(25)])
    with EndOffsetProbe(bootstrap) as probe:
        tps = probe.partitions([topic])
        ends = probe.latest(tps)
        assert ends == {(topic, 0): 25, (topic, 1): 0}
        assert probe.latest(tps, hints=ends) == ends
        # A hint past the end (a recreated topic) falls back to the listed offset.
        assert probe.latest(tps, hints={(topic, 0): 40}) == ends
    batches, _ = stream(spark, {"bootstrap": bootstrap, "topics": topic, "decode": "none"},
                        tmp_path / "ckpt")  # fmt: skip
    assert sorted(o for _, _, o in positions(batches)) == list(range(25))


def test_batch_read_between_offsets(spark: SparkSession, bootstrap: str, prefix: str) -> None:
    topics = internal_topics(bootstrap, prefix)
    commits = [record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(i, "", i)) for i in range(6)]
    append(bootstrap, topics.offsets, commits)
    frame = (
        spark.read.format("kafkacoord")
        .option("bootstrap", bootstrap)
        .option("topics", topics.offsets)
        .option("endingOffsets", json.dumps({f"{topics.offsets}|0": 4}))
        .load()
    )
    got = [r["offset_commit_record"]["offset"] for r in frame.orderBy("offset").collect()]
    assert got == [0, 1, 2, 3]


def test_a_missing_topic_is_a_clear_error(spark: SparkSession, bootstrap: str, prefix: str,
                                          tmp_path: Path) -> None:  # fmt: skip
    with pytest.raises(Exception, match="does not exist"):
        stream(spark, {"bootstrap": bootstrap, "topics": f"{prefix}nope"}, tmp_path / "ckpt")
