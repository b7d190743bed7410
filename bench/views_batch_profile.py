"""Where a view micro-batch's time goes: Spark's phases and the batch writer's steps.

On an embedded broker (``--broker``): ``--records`` offset keys are folded
into a Delta warehouse by the ``--source`` (``python``, the default, or
``connector``), then the job runs with a 1 s trigger under ``views.py``'s
freshness load. Per batch that read data: Spark's ``durationMs`` (``latestOffset``,
``queryPlanning``, ``addBatch``, ``walCommit``, ``commitOffsets``) and, inside
``addBatch``, the writer's ``toArrow`` (the fold's Spark job), ``changes`` and
``commit`` (the Delta merge and snapshot), each as a share of
``triggerExecution``; each stateful operator's commit and fsync times (``state``:
the fold's, ``fence``: the connector's fence stage); and each stage of the
batch's Spark job, from the UI's REST API: wall time as a share of
``triggerExecution``, and its tasks' run and JVM CPU time (Python workers'
CPU is not in it).

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
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
import views
from benchlib import BROKERS, broker_for

from kafkacoord.spark import tables, writer

STEPS: dict[int, dict[str, float]] = {}
PROGRESS: list[dict[str, Any]] = []
QUERY_ID: list[str] = []


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
        QUERY_ID[:] = [str(job.query.id)]


def shares() -> dict[str, Any]:
    total = sum(p["durationMs"]["triggerExecution"] for p in PROGRESS)
    result: dict[str, Any] = {
        "batches": len(PROGRESS),
        "batch_median_s": statistics.median(
            p["durationMs"]["triggerExecution"] / 1000 for p in PROGRESS
        ),
        "batches_s": [round(p["durationMs"]["triggerExecution"] / 1000, 2) for p in PROGRESS],
    }
    for phase in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets"):
        result[phase] = round(sum(p["durationMs"].get(phase, 0) for p in PROGRESS) / total, 3)
    steps = [STEPS[int(p["batchId"])] for p in PROGRESS if int(p["batchId"]) in STEPS]
    for step in ("toArrow", "changes", "commit"):
        result[step] = round(sum(s[step] for s in steps) * 1000 / total, 3)
    # The fold's aggregation (stateStoreSave) is "state"; the connector's fence stage "fence".
    names = {"stateStoreSave": "state", "applyInPandasWithState": "fence"}
    operators = {op["operatorName"] for p in PROGRESS for op in p["stateOperators"]}
    for operator in sorted(operators):
        state = [op for p in PROGRESS for op in p["stateOperators"]
                 if op["operatorName"] == operator]  # fmt: skip
        name = names.get(operator, operator)
        result[f"{name}_commit_ms_median"] = statistics.median(s["commitTimeMs"] for s in state)
        result[f"{name}_fsync_ms_median"] = statistics.median(
            s["customMetrics"].get("rocksdbCommitFileSyncLatencyMs", 0) for s in state
        )
    return result


def _ui(spark: Any, path: str) -> Any:
    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/{path}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _at(text: str) -> float:
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def stage_shares(spark: Any) -> dict[str, Any]:
    """Each stage of a batch's jobs (in submission order): wall time as a share of
    ``triggerExecution``, and its tasks' run and CPU time per batch (medians)."""
    batches = {int(p["batchId"]): p["durationMs"]["triggerExecution"] for p in PROGRESS}
    stages = {s["stageId"]: s for s in _ui(spark, "stages?status=complete")}
    walls: dict[int, list[float]] = {}
    runs: dict[int, list[float]] = {}
    cpus: dict[int, list[float]] = {}
    tasks: dict[int, int] = {}
    for job in _ui(spark, "jobs"):
        text = job.get("description") or ""
        if f"id = {QUERY_ID[0]}" not in text:
            continue
        batch = int(text.rsplit("batch = ", 1)[1].split()[0])
        if batch not in batches:
            continue
        done = [stages[i] for i in sorted(job["stageIds"]) if i in stages]
        for position, stage in enumerate(done):
            walls.setdefault(position, []).append(
                (_at(stage["completionTime"]) - _at(stage["submissionTime"])) * 1000
            )
            runs.setdefault(position, []).append(stage["executorRunTime"])
            cpus.setdefault(position, []).append(stage["executorCpuTime"] / 1e6)
            tasks[position] = stage["numTasks"]
    total = sum(batches.values())
    return {
        f"stage{i}": {
            "tasks": tasks[i],
            "wall_share": round(sum(walls[i]) / total, 3),
            "task_run_ms_median": statistics.median(runs[i]),
            "task_cpu_ms_median": round(statistics.median(cpus[i])),
        }
        for i in sorted(walls)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=1_000, help="records per second")
    parser.add_argument("--source", choices=("python", "connector"), default="python")
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    parser.add_argument(
        "--state-partitions", type=int, default=None,
        help="the fold's state partitions (default: the session's cores)",
    )  # fmt: skip
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    writer.ViewWriter.__call__ = timed_call  # type: ignore[method-assign]
    views.view_job = recorded_job
    from kafkacoord.spark.connector import connector_jars
    from kafkacoord.spark.run import RunConfig, Source
    from kafkacoord.spark.session import spark_session

    source = Source(args.source)
    jars = connector_jars() if source is Source.CONNECTOR else []

    with (
        tempfile.TemporaryDirectory(prefix="kc-views-profile-") as tmp,
        broker_for(args.broker, Path(tmp)) as broker,
    ):
        spark = spark_session("local[2]", state_partitions=args.state_partitions, jars=jars)
        spark.sparkContext.setLogLevel("ERROR")
        data = views.Dataset(views.make_topics(broker.bootstrap, "p"), args.records)
        views.write_dataset(broker.bootstrap, data)
        warehouse = Path(tmp) / "wh"
        prefix = data.topics.prefix
        views.build_views(spark, RunConfig(broker.bootstrap, warehouse, prefix=prefix,
                                           available_now=True, source=source), data)  # fmt: skip
        config = RunConfig(broker.bootstrap, warehouse, prefix=prefix,
                           trigger="1000 milliseconds", source=source)  # fmt: skip
        p95 = views.freshness(spark, config, broker.bootstrap, data, seconds=args.seconds,
                              rate=args.rate)  # fmt: skip
        stages = stage_shares(spark)
        spark.stop()
    result = {"source": args.source, "broker": args.broker, "freshness_p95_s": round(p95, 3)}
    print(json.dumps({**result, **shares(), **stages}), flush=True)


if __name__ == "__main__":
    main()
