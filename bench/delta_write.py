"""The views' warehouse against Delta Lake: the cost of one micro-batch, in one run.

Three writers of the same keyed table (``offset_commits``' columns, ``--keys``
rows), given the same batches, in turns (the order rotates each round):

- ``warehouse``: the hand-made Parquet store the views ran on before Delta
  (``parquet_warehouse.py``, the bench's baseline): the batch is appended as one
  Parquet file; its compactor then merges files, timed apart (in the job it ran
  off the batch path, but on the same cores)
- ``deltalake``: delta-rs, from the driver: ``DeltaTable.merge`` (update, delete
  on tombstone, insert), copy-on-write
- ``delta_spark``: delta-spark in a local Spark session: ``DeltaTable.merge``
  on a table with deletion vectors (merge-on-read); its source is the batch
  as a Spark DataFrame, as ``foreachBatch`` hands it

Each round applies one upsert batch (``--batch`` keys: 90 % existing, 10 % new)
and one tombstone batch (``--batch`` existing keys deleted). Then, once: the
full read of the table (what every view does), Delta's ``optimize`` and
``vacuum``, and the size on disk.

delta-spark's jars: ``--delta-jars DIR`` (e.g. copied by ``mvn
dependency:copy-dependencies`` of ``io.delta:delta-spark_4.2_2.13``); without it
that writer is left out.

The last stdout line is JSON. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from benchlib import log
from parquet_warehouse import ParquetWarehouse

from kafkacoord.spark import tables
from kafkacoord.spark.warehouse import DELETED, KEY
from kafkacoord.spark.warehouse.maintenance import Maintenance

TABLE = "offset_commits"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def _schema() -> pa.Schema:
    fields = []
    for f in tables.schemas()[TABLE]:
        # Delta stores timestamps in microseconds.
        fields.append(pa.field(f.name, pa.timestamp("us", tz="UTC")) if f.name == "log_time" else f)
    return pa.schema(fields)


def rows(ids: np.ndarray, version: int, *, deleted: bool = False) -> pa.Table:
    """Rows for the key numbers ``ids``; ``version`` varies the values batch to batch."""
    n = len(ids)
    ids_list = ids.tolist()
    offsets = ids.astype(np.int64) + version
    window_entry = pa.StructArray.from_arrays(
        [pa.array(offsets), pa.array(offsets * 10)], names=["offset", "commit_timestamp_ms"]
    )
    window = pa.ListArray.from_arrays(pa.array(np.arange(0, n + 1, dtype=np.int32)), window_entry)
    columns: dict[str, Any] = {
        KEY: pa.array([b"%d\x00g%d\x00t\x00%d" % (i % 50, i // 500, i % 500) for i in ids_list]),
        DELETED: pa.array(np.full(n, deleted)),
        "group": pa.array([f"g{i // 500}" for i in ids_list]),
        "topic": pa.array(["t"] * n),
        "partition": pa.array((ids % 500).astype(np.int32)),
        "offset": pa.array(offsets),
        "leader_epoch": pa.array(np.zeros(n, np.int32)),
        "metadata": pa.array([""] * n),
        "commit_timestamp_ms": pa.array(offsets * 10),
        "expire_timestamp_ms": pa.nulls(n, pa.int64()),
        "shard": pa.array((ids % 50).astype(np.int32)),
        "log_offset": pa.array(offsets),
        "log_time": pa.array(offsets * 1000, pa.timestamp("us", tz="UTC")),
        "window": window,
    }
    schema = pa.schema([pa.field(KEY, pa.binary()), pa.field(DELETED, pa.bool_()), *_schema()])
    return pa.table(columns, schema=schema)


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Current:
    name = "warehouse"

    def __init__(self, root: Path, initial: pa.Table) -> None:
        self.schema = tables.schemas()[TABLE]
        self.wh = ParquetWarehouse(root)
        self.compactor = Maintenance(self.wh, {TABLE: self.schema})  # type: ignore[arg-type]
        self.batch = 0
        self.apply(initial)
        self.compact()

    def apply(self, batch: pa.Table) -> None:
        self.batch += 1
        self.wh.commit({TABLE: batch}, {TABLE: self.schema}, query="q", batch=self.batch)

    def compact(self) -> None:
        self.compactor.run_once()

    def read(self) -> int:
        return int(self.wh.read(TABLE, self.schema).num_rows)

    def maintain(self) -> None:
        self.compactor.run_once(full=True)

    def files(self) -> int:
        return len(self.wh.manifest().files(TABLE))


class DeltaRs:
    name = "deltalake"

    def __init__(self, root: Path, initial: pa.Table) -> None:
        from deltalake import write_deltalake

        self.root = root
        write_deltalake(str(root), initial, mode="overwrite")

    def _table(self) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(str(self.root))

    def apply(self, batch: pa.Table) -> None:
        (
            self._table()
            .merge(batch, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
            .when_matched_delete(predicate=f"s.{DELETED}")
            .when_matched_update_all(predicate=f"NOT s.{DELETED}")
            .when_not_matched_insert_all(predicate=f"NOT s.{DELETED}")
            .execute()
        )

    def compact(self) -> None:
        pass  # copy-on-write: nothing to merge later

    def read(self) -> int:
        return int(self._table().to_pyarrow_dataset().to_table().num_rows)

    def maintain(self) -> None:
        table = self._table()
        table.optimize.compact()
        table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)

    def files(self) -> int:
        return len(self._table().file_uris())


class DeltaSpark:
    name = "delta_spark"

    def __init__(self, root: Path, initial_from: Path, jars: list[str]) -> None:
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        self.spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.jars", ",".join(jars))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
            .getOrCreate()
        )
        self.root = root
        shutil.copytree(initial_from, root)
        self.spark.sql(
            f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
        )

    def _table(self) -> Any:
        from delta.tables import DeltaTable

        return DeltaTable.forPath(self.spark, str(self.root))

    def apply(self, batch: pa.Table) -> None:
        source = self.spark.createDataFrame(batch)
        (
            self._table()
            .alias("t")
            .merge(source.alias("s"), f"t.{KEY} = s.{KEY}")
            .whenMatchedDelete(f"s.{DELETED}")
            .whenMatchedUpdateAll(f"NOT s.{DELETED}")
            .whenNotMatchedInsertAll(f"NOT s.{DELETED}")
            .execute()
        )

    def compact(self) -> None:
        pass

    def read(self) -> int:
        return int(self.spark.read.format("delta").load(str(self.root)).toArrow().num_rows)

    def maintain(self) -> None:
        table = self._table()
        table.optimize().executeCompaction()
        table.vacuum(0)

    def files(self) -> int:
        return int(self._table().detail().collect()[0]["numFiles"])


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "n": len(samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delta-jars", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    live = np.arange(args.keys)
    next_id = args.keys
    work = Path(tempfile.mkdtemp(prefix="delta-write-"))
    result: dict[str, Any] = {"bench": "delta_write", "keys": args.keys, "batch": args.batch}
    try:
        initial = rows(live, 0)
        log(f"setup: {args.keys:,} keys")
        writers: list[Any] = []
        setup = {}
        started = time.perf_counter()
        writers.append(Current(work / "wh", initial))
        setup["warehouse"] = time.perf_counter() - started
        started = time.perf_counter()
        writers.append(DeltaRs(work / "rs", initial))
        setup["deltalake"] = time.perf_counter() - started
        if args.delta_jars is not None:
            jars = [str(p) for p in sorted(args.delta_jars.glob("*.jar"))]
            started = time.perf_counter()
            # The same starting table as the others: a copy taken before any batch.
            writers.append(DeltaSpark(work / "spark", work / "rs", jars))
            setup["delta_spark"] = time.perf_counter() - started
        result["setup_s"] = {k: round(v, 2) for k, v in setup.items()}
        samples: dict[str, dict[str, list[float]]] = {
            w.name: {"upsert": [], "tombstone": [], "compaction": []} for w in writers
        }
        for round_ in range(args.rounds):
            updated = rng.choice(live, size=args.batch * 9 // 10, replace=False)
            fresh = np.arange(next_id, next_id + args.batch - len(updated))
            next_id += len(fresh)
            upsert = rows(np.concatenate([updated, fresh]), round_ + 1)
            live = np.concatenate([live, fresh])
            gone = rng.choice(live, size=args.batch, replace=False)
            tombstones = rows(gone, round_ + 1, deleted=True)
            live = np.setdiff1d(live, gone, assume_unique=True)
            turn = writers[round_ % len(writers) :] + writers[: round_ % len(writers)]
            for writer in turn:
                for kind, batch in (("upsert", upsert), ("tombstone", tombstones)):
                    samples[writer.name][kind].append(timed(partial(writer.apply, batch)))
                    samples[writer.name]["compaction"].append(timed(writer.compact))
            log(f"round {round_ + 1}: " + ", ".join(
                f"{w.name} {samples[w.name]['upsert'][-1]:.2f}/"
                f"{samples[w.name]['tombstone'][-1]:.2f} s" for w in writers))  # fmt: skip
        expected = len(live)
        for writer in writers:
            out: dict[str, Any] = {k: summary(v) for k, v in samples[writer.name].items()}
            path = Path(writer.root if hasattr(writer, "root") else writer.wh.root)
            out["files_before_maintenance"] = writer.files()
            out["bytes_before_maintenance"] = du(path)
            started = time.perf_counter()
            read_rows = writer.read()
            out["read_s"] = round(time.perf_counter() - started, 3)
            out["rows_ok"] = read_rows == expected
            out["maintenance_s"] = round(timed(writer.maintain), 3)
            out["bytes_after_maintenance"] = du(path)
            result[writer.name] = out
            log(f"{writer.name}: {json.dumps(out)}")
        result["rows"] = expected
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
