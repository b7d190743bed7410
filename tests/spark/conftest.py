"""One local[2] Spark session for all Spark tests (it takes ~10 s to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from kafkacoord.spark.session import spark_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session(
        "local[2]",
        app_name="kafkacoord-tests",
        state_partitions=2,
        conf={"spark.ui.enabled": "false", "spark.sql.streaming.minBatchesToRetain": "5"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
