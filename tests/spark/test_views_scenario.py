"""The views equal what the daemon's own RocksDB cache holds for the same records."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.spark.run import RunConfig, run

from .scenario import OFFSETS_PARTITIONS, RETENTION_MS, assert_views_match_cache, build, now_ms
from .scenario import write as write_scenario
from .support import append, internal_topics, load_cache, record

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_views_equal_the_cache_row_for_row_and_batches_write_only_the_change(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    scenario = build(topics, f"{prefix}orders", now_ms())
    write_scenario(bootstrap, scenario)
    warehouse = tmp_path / "warehouse"
    config = RunConfig(bootstrap, warehouse, prefix=prefix, available_now=True,
                       max_records_per_batch=9, retention_ms=RETENTION_MS)  # fmt: skip

    job = run(spark, config)
    total = len(scenario.metadata) + len(scenario.offsets)
    assert job.writer.batches >= total // 9

    cache, loads = load_cache(bootstrap, topics, tmp_path / "cache", RETENTION_MS)
    poison = sum(load.stats.poison for load in loads[topics.offsets].values())
    assert poison == scenario.poison[topics.offsets]
    assert_views_match_cache(warehouse, cache, scenario)

    # A later batch writes only its change: three commits of one key, one row.
    more = [record(OffsetCommitKey("payments", scenario.user_topic, 1),
                   OffsetCommitValue(6 + i, "", scenario.now_ms), 0) for i in range(3)]  # fmt: skip
    append(bootstrap, topics.offsets, more)
    job = run(spark, config)
    assert job.writer.batches == 1
    assert job.writer.last_rows == {"offset_commits": 1}  # one key changed, one row written
    cache.close()
    cache, _ = load_cache(bootstrap, topics, tmp_path / "cache2", RETENTION_MS)
    assert_views_match_cache(warehouse, cache, scenario)
