"""The view job's session settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from kafkacoord.spark.run import RunConfig, Source, session_conf
from kafkacoord.spark.session import configure
from kafkacoord.spark.source.schema import decoded_schema

pytestmark = [pytest.mark.spark]


def test_state_partitions_default_to_the_sessions_cores_and_an_explicit_value_wins(
    spark: SparkSession,
) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        configure(spark)
        cores = spark.sparkContext.defaultParallelism
        assert spark.conf.get("spark.sql.shuffle.partitions") == str(cores) == "2"  # local[2]
        configure(spark, state_partitions=5)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "5"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def nested_fields(data_type: DataType) -> int:
    if isinstance(data_type, StructType):
        return sum(nested_fields(f.dataType) for f in data_type.fields)
    if isinstance(data_type, MapType):
        return nested_fields(data_type.keyType) + nested_fields(data_type.valueType)
    if isinstance(data_type, ArrayType):
        return nested_fields(data_type.elementType)
    return 1


def test_the_connectors_query_starts_with_whole_stage_code_for_wide_rows_and_leaves_the_session(
    spark: SparkSession,
) -> None:
    key = "spark.sql.codegen.maxFields"
    connector = RunConfig("127.0.0.1:9", Path("/unused"), source=Source.CONNECTOR)
    # Spark counts nested fields (WholeStageCodegenExec.isTooManyFields).
    assert int(connector.query_sql_conf()[key]) > nested_fields(decoded_schema()) > 100
    assert RunConfig("127.0.0.1:9", Path("/unused")).query_sql_conf() == {}
    before = spark.conf.get(key)
    spark.conf.set("spark.sql.codegen.fallback", "true")  # a setting the block leaves alone
    with session_conf(spark, {key: "2000", "spark.kafkacoord.unset": "x"}):
        assert spark.conf.get(key) == "2000"
        assert spark.conf.get("spark.kafkacoord.unset") == "x"
    assert spark.conf.get(key) == before
    assert spark.conf.get("spark.kafkacoord.unset", None) is None
