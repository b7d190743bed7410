"""The view job's session settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from kafkacoord.spark.run import INTERPRETED_SQL_CONF, RunConfig, Source, session_conf, unset_on
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


def test_a_running_fold_starts_interpreted_unless_the_operator_chose_and_leaves_the_session(
    spark: SparkSession,
) -> None:
    def conf(**kwargs: Any) -> dict[str, str]:
        return RunConfig("127.0.0.1:9", Path("/unused"), **kwargs).query_sql_conf()

    for source in Source:
        assert conf(source=source) == INTERPRETED_SQL_CONF
        assert conf(source=source, available_now=True, interpreted=True) == INTERPRETED_SQL_CONF
    # Large batches: compiled, the connector's wide decoded rows in whole-stage code too.
    assert conf(available_now=True) == conf(interpreted=False) == {}
    compiled = conf(source=Source.CONNECTOR, available_now=True)
    # Spark counts nested fields (WholeStageCodegenExec.isTooManyFields).
    assert int(compiled["spark.sql.codegen.maxFields"]) > nested_fields(decoded_schema()) > 100
    assert INTERPRETED_SQL_CONF["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    whole_stage = "spark.sql.codegen.wholeStage"
    # Spark's defaults are not an operator's choice.
    assert unset_on(spark, INTERPRETED_SQL_CONF) == INTERPRETED_SQL_CONF
    spark.conf.set(whole_stage, "true")
    try:
        assert whole_stage not in unset_on(spark, INTERPRETED_SQL_CONF)
        assert "spark.sql.codegen.factoryMode" in unset_on(spark, INTERPRETED_SQL_CONF)
    finally:
        spark.conf.unset(whole_stage)
    key = "spark.sql.codegen.maxFields"
    before = spark.conf.get(key)
    with session_conf(spark, {key: "2000", "spark.kafkacoord.unset": "x"}):
        assert spark.conf.get(key) == "2000"
        assert spark.conf.get("spark.kafkacoord.unset") == "x"
    assert spark.conf.get(key) == before
    assert spark.conf.get("spark.kafkacoord.unset", None) is None
