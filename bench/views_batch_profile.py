"""Where a view micro-batch's time goes: Spark's phases and the batch writer's steps.

On an embedded broker: ``--records`` offset keys are folded into a Delta
warehouse, then the job runs with a 1 s trigger under ``views.py``'s freshness
load. Per batch that read data: Spark's ``durationMs`` (``latestOffset``,
``queryPlanning``, ``addBatch``, ``walCommit``, ``commitOffsets``) and, inside
``addBatch``, the writer's ``toArrow`` (the fold's Spark job), ``changes`` and
``commit`` (the Delta merge and snapshot), each as a share of
``triggerExecution``; and the state store's commit and fsync times.

The last stdout line is JSON. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog
import views
from benchlib import broker_for

from kafkacoord.spark import tables, writer

STEPS: dict[int, dict[str, float]] = {}
PROGRESS: list[dict[str, Any]] = []


def timed_call(self: writer.ViewWriter, batch: Any, batch_id: int) -> None:
    """``ViewWriter.__call__`` with its steps timed (no replay handling: a fresh job)."""
    started = time.perf_counter()
    fold = batch.toArrow()
    collected = time.perf_counter()
    changes = tables.changes(fold)
    split = time.perf_counter()
    self.warehouse.commit(changes, tables.schemas(), query=self.query, batch=batch_id,
                          settings=self.settings)  # fmt: skip
    done = time.perf_counter()
    STEPS[batch_id] = {"toArrow": collected - started, "changes": split - collected,
                       "commit": done - split}  # fmt: skip
    self._phase("published", batch_id)


_view_job = views.view_job


@contextmanager
def recorded_job(spark: Any, config: Any, on_phase: Any = None) -> Iterator[Any]:
    with _view_job(spark, config, on_phase) as job:
        yield job
        PROGRESS[:] = [p for p in job.query.recentProgress if p["numInputRows"]]


def shares() -> dict[str, Any]:
    total = sum(p["durationMs"]["triggerExecution"] for p in PROGRESS)
    result: dict[str, Any] = {
        "batches": len(PROGRESS),
        "batch_median_s": statistics.median(
            p["durationMs"]["triggerExecution"] / 1000 for p in PROGRESS
        ),
    }
    for phase in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets"):
        result[phase] = round(sum(p["durationMs"].get(phase, 0) for p in PROGRESS) / total, 3)
    steps = [STEPS[int(p["batchId"])] for p in PROGRESS if int(p["batchId"]) in STEPS]
    for step in ("toArrow", "changes", "commit"):
        result[step] = round(sum(s[step] for s in steps) * 1000 / total, 3)
    state = [p["stateOperators"][0] for p in PROGRESS if p["stateOperators"]]
    result["state_commit_ms_median"] = statistics.median(s["commitTimeMs"] for s in state)
    result["state_fsync_ms_median"] = statistics.median(
        s["customMetrics"].get("rocksdbCommitFileSyncLatencyMs", 0) for s in state
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=1_000, help="records per second")
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    writer.ViewWriter.__call__ = timed_call  # type: ignore[method-assign]
    views.view_job = recorded_job
    from kafkacoord.spark.run import RunConfig
    from kafkacoord.spark.session import spark_session

    with (
        tempfile.TemporaryDirectory(prefix="kc-views-profile-") as tmp,
        broker_for("tansu", Path(tmp)) as broker,
    ):
        spark = spark_session("local[2]", state_partitions=4, jars=[])
        spark.sparkContext.setLogLevel("ERROR")
        data = views.Dataset(views.make_topics(broker.bootstrap, "p"), args.records)
        views.write_dataset(broker.bootstrap, data)
        warehouse = Path(tmp) / "wh"
        prefix = data.topics.prefix
        views.build_views(spark, RunConfig(broker.bootstrap, warehouse, prefix=prefix,
                                           available_now=True), data)  # fmt: skip
        config = RunConfig(broker.bootstrap, warehouse, prefix=prefix,
                           trigger="1000 milliseconds")  # fmt: skip
        p95 = views.freshness(spark, config, broker.bootstrap, data, seconds=args.seconds,
                              rate=args.rate)  # fmt: skip
        spark.stop()
    print(json.dumps({"freshness_p95_s": round(p95, 3), **shares()}), flush=True)


if __name__ == "__main__":
    main()
