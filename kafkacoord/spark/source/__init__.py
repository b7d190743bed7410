"""A PySpark 4 Python data source over Kafka, decoding kafkacoord's Avro records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .datasource import FORMAT, KafkacoordDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "KafkacoordDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("kafkacoord")`` available in this session."""
    spark.dataSource.register(KafkacoordDataSource)
