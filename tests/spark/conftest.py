"""One local[2] Spark session for all Spark tests (it takes ~10 s to start).

The session carries the jars of Spark's Kafka connector and spark-avro, resolved
from Maven Central on first use, so both view sources share it. Where they
cannot be resolved the session starts without them: the Python source's tests
still run, and every test of the connector fails with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from kafkacoord.spark.connector import ConnectorJarsError, connector_jars  # noqa: E402
from kafkacoord.spark.session import spark_session  # noqa: E402

_jars_error: list[str] = []


def _jars() -> list[str]:
    try:
        return connector_jars()
    except ConnectorJarsError as exc:
        _jars_error.append(str(exc))
        return []


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session(
        "local[2]",
        app_name="kafkacoord-tests",
        state_partitions=2,
        conf={"spark.ui.enabled": "false", "spark.sql.streaming.minBatchesToRetain": "5"},
        jars=_jars(),
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def connector(spark: SparkSession) -> SparkSession:
    """The session, with the connector's jars on its classpath (a failure says why not)."""
    if _jars_error:
        pytest.fail(f"Spark's Kafka connector is not available: {_jars_error[0]}", pytrace=False)
    return spark
