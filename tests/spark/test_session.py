"""The view job's session settings."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from kafkacoord.spark.session import configure

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
