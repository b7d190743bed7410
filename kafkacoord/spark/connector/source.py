"""The internal topics through Spark's own Kafka source, as the Python source's rows.

    spark.readStream.format("kafka")   (spark-sql-kafka-0-10)
      -> record type tag and epoch header, in Spark SQL
      -> the epoch fences, in the read's own tasks (mapInArrow)        (fence.py)
      -> from_avro against the codecs' schemas, poison and fencing   (decode.py)

The result has exactly the columns and values of ``spark.readStream.format("kafkacoord")``,
so the fold, the warehouse and the views are the same code for both sources.
The session needs the connector's jars (:mod:`kafkacoord.spark.connector.jars`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)

from kafkacoord.codecs.fencing import EPOCH_HEADER

from .avro import key_type, unsigned
from .decode import decode
from .fence import STAGE_INPUT, STAGE_OUTPUT, ReadOrderFence

FORMAT = "kafka"
# The Java consumer's defaults wait up to 500 ms for more data on every fetch, which a
# micro-batch of many partitions with a few records each pays over and over.
CONSUMER_DEFAULTS: Final = {"fetch.max.wait.ms": "10"}

# For a fold whose code is compiled (an available-now run). The decoded rows have 168
# nested fields, past Spark's 100 for whole-stage code generation: each task then
# generated the decode projection's code anew (bench/README, "The connector's fence
# and decode").
COMPILED_SQL_CONF: Final = {"spark.sql.codegen.maxFields": "2000"}


@dataclass(frozen=True)
class ConnectorOptions:
    bootstrap: str
    prefix: str = "__kc_"
    max_records_per_batch: int | None = None
    # Tasks reading one micro-batch (default: the cluster's cores).
    read_tasks: int | None = None
    # Java Kafka client settings, passed as kafka.<setting>.
    kafka: Mapping[str, str] = field(default_factory=dict)
    # librdkafka settings for the same cluster: the fence's scans of the log.
    fence_kafka: Mapping[str, str] = field(default_factory=dict)
    # A local directory the fence's workers share their marks in (beside the checkpoint).
    fence_marks: str | None = None

    @property
    def topics(self) -> tuple[str, str]:
        return f"{self.prefix}metadata", f"{self.prefix}offsets"


def epoch_tag(headers: Column) -> Column:
    """The first well-formed ``kc.epoch`` header as a signed int, as ``header_epoch``."""
    tags = F.filter(
        headers, lambda h: (h["key"] == EPOCH_HEADER) & (F.octet_length(h["value"]) == 4)
    )
    raw = unsigned(F.get(tags, 0)["value"], 1, 4).cast("long")
    return F.when(raw >= 2**31, raw - 2**32).otherwise(raw).cast("int")


def kafka_stream(spark: SparkSession, options: ConnectorOptions) -> DataFrame:
    reader = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", options.bootstrap)
        .option("subscribe", ",".join(options.topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    if options.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_records_per_batch))
    for name, value in {**CONSUMER_DEFAULTS, **options.kafka}.items():
        reader = reader.option(f"kafka.{name}", value)
    return reader.load()


def fenced(raw: DataFrame, tasks: int, fence: ReadOrderFence) -> DataFrame:
    """Spark's Kafka rows through the fence, read by at most ``tasks`` tasks.

    Spark's Kafka source plans a task per partition with new records: fifty offsets
    partitions with a few changes each would cost fifty tasks a micro-batch. The
    fence runs in the same tasks, right after the read, where rows are in log order.
    """
    key = F.col("key")
    staged = (
        raw.coalesce(tasks)
        .withColumns(
            {
                "kind": F.when(F.octet_length(key) >= 1, key_type(key)),
                "tag": epoch_tag(F.col("headers")),
                "partition": F.col("partition").cast("int"),
            }
        )
        .select(*STAGE_INPUT)
    )
    return staged.mapInArrow(fence, STAGE_OUTPUT)


def connector_source(spark: SparkSession, options: ConnectorOptions) -> DataFrame:
    """The decoded, fenced rows of both internal topics, as a stream."""
    tasks = options.read_tasks or spark.sparkContext.defaultParallelism
    fence = ReadOrderFence(options.bootstrap, options.fence_kafka, options.fence_marks)
    return decode(fenced(kafka_stream(spark, options), tasks, fence))
