"""Spark Structured Streaming views of kafkacoord's internal topics (docs/architecture.md#views).

- ``kafkacoord.spark.source``: the ``kafkacoord`` Python data source (PySpark 4).
- ``kafkacoord.spark.connector``: the same rows from Spark's Kafka source and spark-avro.
- ``kafkacoord.spark.pipeline`` / ``run``: the streaming fold into the warehouse.
- ``kafkacoord.spark.views``: the views, read from the warehouse with no JVM.
- ``kafkacoord.spark.cli``: ``views run | show | list``.

Importing this package needs neither pyspark nor a JVM; only the job does.
"""
