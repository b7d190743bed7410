"""Crashes mid-batch and between batches: the restarted job's views are still exact.

Nothing is lost and nothing counted twice: the scenario check compares every
view with the cache, including poison counts and the leadership history.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kafkacoord.spark.checkpoint_lock import CheckpointInUseError
from kafkacoord.spark.run import LOCAL_CHECKPOINT_MANAGER, RunConfig, ViewJob, run
from kafkacoord.spark.warehouse import Warehouse

from .scenario import OFFSETS_PARTITIONS, RETENTION_MS, assert_views_match_cache, build, now_ms
from .scenario import write as write_scenario
from .support import internal_topics, load_cache

FACTORY_MODE = "spark.sql.codegen.factoryMode"

pytestmark = [pytest.mark.spark, pytest.mark.integration]


class CrashError(RuntimeError):
    pass


def crash_at(phase: str, batch: int):  # type: ignore[no-untyped-def]
    def hook(name: str, batch_id: int) -> None:
        if name == phase and batch_id == batch:
            raise CrashError(f"injected crash at {phase} of batch {batch}")

    return hook


def test_crashes_inside_a_batch_then_restart(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    scenario = build(topics, f"{prefix}orders", now_ms())
    write_scenario(bootstrap, scenario)
    warehouse = tmp_path / "warehouse"
    config = RunConfig(bootstrap, warehouse, prefix=prefix, available_now=True,
                       max_records_per_batch=8, retention_ms=RETENTION_MS)  # fmt: skip
    store = Warehouse(warehouse)

    # CrashError after the batch's table commits, before its snapshot: invisible.
    with pytest.raises(Exception, match="injected crash"):
        run(spark, config, on_phase=crash_at("written", 2))
    assert store.manifest().batches["fold"] == 1
    # CrashError after the snapshot, before Spark records the batch: Spark replays it.
    with pytest.raises(Exception, match="injected crash"):
        run(spark, config, on_phase=crash_at("published", 4))
    assert store.manifest().batches["fold"] == 4

    run(spark, config)
    cache, _ = load_cache(bootstrap, topics, tmp_path / "cache", RETENTION_MS)
    assert_views_match_cache(warehouse, cache, scenario)


def test_a_killed_job_restarts_from_its_checkpoint(
    spark: SparkSession, bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    topics = internal_topics(bootstrap, prefix, OFFSETS_PARTITIONS)
    scenario = build(topics, f"{prefix}orders", now_ms())
    write_scenario(bootstrap, scenario)
    warehouse = tmp_path / "warehouse"
    args = [sys.executable, "-m", "kafkacoord.spark.job", "--bootstrap", bootstrap,
            "--warehouse", str(warehouse), "--prefix", prefix, "--available-now",
            "--max-records-per-batch", "3", "--master", "local[1]"]  # fmt: skip
    log = (tmp_path / "job.log").open("wb")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    job = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                           start_new_session=True)  # fmt: skip
    store = Warehouse(warehouse)
    config = RunConfig(bootstrap, warehouse, prefix=prefix, available_now=True,
                       retention_ms=RETENTION_MS)  # fmt: skip
    refused = False
    try:
        deadline = time.monotonic() + 120
        while store.manifest().batches.get("fold", -1) < 3:
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the job made no progress"
            if not refused and store.manifest().batches.get("fold", -1) >= 0:
                # A second job on the running job's checkpoint is refused at its start.
                with pytest.raises(CheckpointInUseError, match="another view job"):
                    ViewJob(spark, config).start()
                refused = True
            time.sleep(0.2)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the job's own process group: python and its JVM
        job.wait(30)
    applied = store.manifest().batches["fold"]
    assert applied >= 3

    assert refused
    # The kill left no lock behind. The restart runs the fold interpreted, as a running job does.
    restarted = run(spark, dataclasses.replace(config, interpreted=True))
    assert restarted.writer.batches >= 1
    assert restarted.query is not None
    offset_log = restarted.query._jsq.streamingQuery().offsetLog()  # type: ignore[attr-defined]
    assert offset_log.fileManager().getClass().getName() == LOCAL_CHECKPOINT_MANAGER
    # Its views are checked below; the session kept its own value.
    stream_session = restarted.query._jsq.streamingQuery().sparkSessionForStream()  # type: ignore[attr-defined]
    assert stream_session.conf().get(FACTORY_MODE) == "NO_CODEGEN"
    assert spark.conf.get(FACTORY_MODE) != "NO_CODEGEN"
    assert store.manifest().batches["fold"] > applied
    cache, _ = load_cache(bootstrap, topics, tmp_path / "cache", RETENTION_MS)
    assert_views_match_cache(warehouse, cache, scenario)
