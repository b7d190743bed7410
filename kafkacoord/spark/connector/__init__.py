"""The view pipeline's second source: Spark's Kafka connector and spark-avro.

``connector_source(spark, ConnectorOptions(...))`` yields the same rows as the
``kafkacoord`` Python data source, read by ``spark-sql-kafka-0-10`` and decoded
by ``from_avro``; ``connector_jars()`` resolves the jars a session needs.
"""

from __future__ import annotations

from .jars import ConnectorJarsError, connector_jars, packages

__all__ = ["ConnectorJarsError", "connector_jars", "packages"]
