"""Run the view job: the streaming fold, the metadata history, table maintenance and the
end-offset sampler."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from .checkpoint_lock import CheckpointLock
from .fold_layout import check_fold_layout, local_path
from .metadata_history import QUERY as HISTORY_QUERY
from .metadata_history import MetadataHistoryWriter
from .pipeline import WINDOW, fold
from .sampler import EndOffsetSampler
from .source import FORMAT
from .tables import schemas
from .views.base import DEFAULT_IMBALANCE_PERCENT, DEFAULT_RETENTION_MS
from .warehouse import Warehouse
from .warehouse.maintenance import Maintenance
from .writer import Phase, ViewWriter, committed_partitions

log = structlog.get_logger(__name__)

QUERY = "fold"
# In the fold's checkpoint: the connector fence's marks (connector/fence.py).
FENCE_MARKS = "kafkacoord-fence-marks"
CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
# Spark's FileSystem-API manager. Its default, the FileContext one, renames each file it
# writes through calls that Hadoop's local file system, without its native library
# (pyspark ships none), runs as child processes: chmod on every create, readlink on
# every rename, several per file. Those forks were 150-200 ms of each state commit and
# most of the offset and commit logs' writes (bench/README, "The checkpoint's file
# manager"). The FileSystem API's rename is rename(2) on a local disk: as atomic, though
# it replaces a file where FileContext's refuses; CheckpointLock keeps a second job off.
LOCAL_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
# A running job's fold evaluates its expressions instead of compiling them. Its
# micro-batches are a few thousand rows, and each task generated code anew for its
# projections (the Kafka reader's row converter, the aggregation's results, the UDFs'
# inputs): that cost more than the rows. An available-now run reads everything there
# in large batches, where compiled code pays: the connector's 1M-record run was about
# a third slower interpreted (bench/README, "Interpreted expressions"). NO_CODEGEN is
# marked internal by Spark; it is the interpreted path Spark falls back to whenever
# generated code fails to compile.
INTERPRETED_SQL_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


class Source(str, Enum):
    """What reads the internal topics; both yield the same rows, so the same views."""

    PYTHON = "python"  # the kafkacoord Python data source (librdkafka, fastavro)
    CONNECTOR = "connector"  # Spark's Kafka source and spark-avro (needs their jars)


@dataclass(frozen=True)
class RunConfig:
    bootstrap: str
    warehouse: Path
    prefix: str = "__kc_"
    trigger: str = "1 second"
    available_now: bool = False
    # Interpret the fold's expressions (INTERPRETED_SQL_CONF); default: unless available-now.
    interpreted: bool | None = None
    # Bounds the changes a batch collects on the driver while catching up.
    max_records_per_batch: int | None = 200_000
    min_records_per_task: int = 20_000
    retention_ms: int = DEFAULT_RETENTION_MS
    imbalance_percent: float = DEFAULT_IMBALANCE_PERCENT
    lag_interval_s: float = 5.0
    # Burrow's allowed-lag for lag_status: a lag at most this counts as none.
    allowed_lag: int = 0
    # lag_history: one row per group partition and bucket, kept for retention_ms.
    lag_history_resolution_s: float = 60.0
    checkpoint: str | None = None
    # librdkafka settings (the Python source, the end-offset sampler).
    kafka: dict[str, str] = field(default_factory=dict)
    source: Source = Source.PYTHON
    # Java Kafka client settings of the connector source (kafka.<setting> options).
    connector_kafka: dict[str, str] = field(default_factory=dict)

    @property
    def checkpoint_location(self) -> str:
        return self.checkpoint or str(self.warehouse / "_checkpoints" / QUERY)

    @property
    def history_checkpoint_location(self) -> str:
        """Beside the fold's checkpoint: the metadata history query's own."""
        return str(Path(self.checkpoint_location).parent / HISTORY_QUERY)

    @property
    def local_checkpoint(self) -> Path | None:
        """The fold's checkpoint directory when it is local, else ``None``."""
        return local_path(self.checkpoint_location)

    @property
    def fence_marks(self) -> str | None:
        """Where the connector's fence shares its marks: in a local checkpoint."""
        local = self.local_checkpoint
        return None if local is None else str(local / FENCE_MARKS)

    def source_options(self) -> dict[str, str]:
        options = {
            "bootstrap": self.bootstrap,
            "prefix": self.prefix,
            "minRecordsPerTask": str(self.min_records_per_task),
        }
        if self.max_records_per_batch:
            options["maxRecordsPerBatch"] = str(self.max_records_per_batch)
        options.update({f"kafka.{k}": v for k, v in self.kafka.items()})
        return options

    def stream(self, spark: SparkSession) -> DataFrame:
        """The decoded, fenced rows of the internal topics, from the configured source."""
        if self.source is Source.CONNECTOR:
            from .connector.source import ConnectorOptions, connector_source

            options = ConnectorOptions(
                self.bootstrap,
                self.prefix,
                self.max_records_per_batch,
                kafka=self.connector_kafka,
                fence_kafka=self.kafka,
                fence_marks=self.fence_marks,
            )
            return connector_source(spark, options)
        return spark.readStream.format(FORMAT).options(**self.source_options()).load()

    def query_sql_conf(self) -> dict[str, str]:
        """Session settings the fold's query starts with."""
        interpreted = not self.available_now if self.interpreted is None else self.interpreted
        if interpreted:
            return dict(INTERPRETED_SQL_CONF)
        if self.source is Source.CONNECTOR:
            from .connector.source import COMPILED_SQL_CONF

            return dict(COMPILED_SQL_CONF)
        return {}

    def checkpoint_sql_conf(self) -> dict[str, str]:
        """Session settings both queries start with, for their checkpoints: the
        FileSystem-API manager for a local checkpoint (a remote one keeps Spark's)."""
        if self.local_checkpoint is None:
            return {}
        return {CHECKPOINT_MANAGER: LOCAL_CHECKPOINT_MANAGER}

    def metadata_stream(self, spark: SparkSession) -> DataFrame:
        """The metadata topic alone, from the Python source (whatever ``source`` says:
        a small topic, read by the driver's librdkafka settings)."""
        options = {**self.source_options(), "topics": f"{self.prefix}metadata"}
        return spark.readStream.format(FORMAT).options(**options).load()

    def settings(self) -> dict[str, Any]:
        """What views are evaluated with, recorded in the manifest for readers."""
        return {
            "retention_ms": self.retention_ms,
            "imbalance_percent": self.imbalance_percent,
            "window": WINDOW,
            "allowed_lag": self.allowed_lag,
            "prefix": self.prefix,
        }


def unset_on(spark: SparkSession, settings: dict[str, str]) -> dict[str, str]:
    """``settings`` less those already set on ``spark``'s session."""
    return {key: value for key, value in settings.items() if spark.conf.get(key, None) is None}


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` in force on ``spark`` inside the block; the previous values after."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


class ViewJob:
    """One running view job; ``start`` then ``await_termination`` or ``stop``."""

    def __init__(
        self,
        spark: SparkSession,
        config: RunConfig,
        *,
        on_phase: Phase | None = None,
        warehouse: Warehouse | None = None,
    ):
        self.spark = spark
        self.config = config
        # ``warehouse``: another object with the Warehouse interface (bench/'s baseline).
        self.warehouse = warehouse or Warehouse(config.warehouse)
        self.maintenance = Maintenance(self.warehouse, schemas())
        self.history_writer = MetadataHistoryWriter(self.warehouse)
        self.history_query: StreamingQuery | None = None
        self.sampler: EndOffsetSampler | None = None
        self.writer = ViewWriter(
            self.warehouse,
            query=QUERY,
            settings=config.settings(),
            on_phase=on_phase,
            on_commit=self._committed,
        )
        self.query: StreamingQuery | None = None
        local = config.local_checkpoint
        self.lock = None if local is None else CheckpointLock(local)

    def _committed(self, commits: Any) -> None:
        if self.sampler is not None:
            self.sampler.watch(committed_partitions(commits))
        self.maintenance.notify()

    def start(self) -> StreamingQuery:
        if self.lock is not None:
            self.lock.acquire()
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> StreamingQuery:
        config = self.config
        config.warehouse.mkdir(parents=True, exist_ok=True)
        removed = self.warehouse.remove_orphans()
        if removed:
            log.info("removed files of an unfinished batch", files=removed)
        self.sampler = EndOffsetSampler(
            self.warehouse,
            config.bootstrap,
            kafka=config.kafka,
            interval_s=config.lag_interval_s,
            lag_resolution_ms=int(config.lag_history_resolution_s * 1000),
            lag_retain_ms=config.retention_ms,
        )
        check_fold_layout(config.checkpoint_location, config.warehouse,
                          connector=config.source is Source.CONNECTOR)  # fmt: skip
        source = config.stream(self.spark)
        writer = (
            fold(source)
            .writeStream.outputMode("update")
            .foreachBatch(self.writer)
            .option("checkpointLocation", config.checkpoint_location)
            .queryName(f"kafkacoord-views-{config.prefix}")
        )
        history = (
            config.metadata_stream(self.spark)
            .writeStream.foreachBatch(self.history_writer)
            .option("checkpointLocation", config.history_checkpoint_location)
            .queryName(f"kafkacoord-metadata-history-{config.prefix}")
        )
        if config.available_now:
            writer = writer.trigger(availableNow=True)
            history = history.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=config.trigger)
            history = history.trigger(processingTime=config.trigger)
            self.sampler.start()
            self.maintenance.start()
        # An operator's own choice (spark-submit --conf) stands over ours.
        checkpoints = unset_on(self.spark, config.checkpoint_sql_conf())
        fold_settings = {**checkpoints, **unset_on(self.spark, config.query_sql_conf())}
        with session_conf(self.spark, fold_settings):
            self.query = writer.start()
        with session_conf(self.spark, checkpoints):
            self.history_query = history.start()
        log.info(
            "view job started",
            warehouse=str(config.warehouse),
            checkpoint=config.checkpoint_location,
        )
        return self.query

    def await_termination(self, timeout_s: float | None = None) -> bool:
        """Until both queries end (available-now) or one fails; False on ``timeout_s``."""
        assert self.query is not None and self.history_query is not None
        if timeout_s is None:
            if self.config.available_now:
                self.query.awaitTermination()
                self.history_query.awaitTermination()
            else:  # runs until one fails (it raises) or is stopped
                self.spark.streams.awaitAnyTermination()
            return True
        deadline = time.monotonic() + timeout_s
        if not self.query.awaitTermination(max(1, int(timeout_s))):
            return False
        left = max(1, int(deadline - time.monotonic()))
        return bool(self.history_query.awaitTermination(left))

    def finish(self) -> None:
        """After an available-now run: fresh end offsets and a compact warehouse."""
        if self.sampler is not None:
            self.sampler.sample(last=True)
        self.maintenance.run_once()

    def stop(self) -> None:
        for query in (self.query, self.history_query):
            if query is not None and query.isActive:
                query.stop()
        self.maintenance.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.lock is not None:
            self.lock.release()


def run(
    spark: SparkSession,
    config: RunConfig,
    *,
    on_phase: Phase | None = None,
    warehouse: Warehouse | None = None,
) -> ViewJob:
    """Run to the end (available-now) or until interrupted; returns the finished job."""
    job = ViewJob(spark, config, on_phase=on_phase, warehouse=warehouse)
    job.start()
    try:
        job.await_termination()
        if config.available_now:
            job.finish()
    finally:
        job.stop()
    return job
