"""The ``kafkacoord`` data source: Kafka topics as a Spark stream or batch, with no JVM connector.

    spark.dataSource.register(KafkacoordDataSource)
    spark.readStream.format("kafkacoord").option("bootstrap", "host:9092").load()

Options (case-insensitive):

- ``bootstrap``: Kafka bootstrap servers (required; ``kafka.bootstrap.servers`` also works).
- ``prefix``: internal topic prefix, default ``__kc_``: reads ``<prefix>metadata`` and
  ``<prefix>offsets``. ``topics`` (comma-separated) names the topics instead.
- ``decode``: ``avro`` (default) for typed columns, ``none`` for raw key and value bytes.
- ``startingOffsets``: ``earliest`` (default), ``latest`` or ``{"topic|partition": offset}``.
- ``endingOffsets``: batch reads only, ``latest`` (default) or a JSON map.
- ``maxRecordsPerBatch``: at most this many offsets per micro-batch.
- ``minRecordsPerTask``: partitions with fewer new records than this share one Spark task
  (default 0: one input partition per Kafka partition). Cuts per-task overhead on small batches.
- ``fence``: mark (``fenced``) what the daemon's loader ignores (default true): stale
  controllers' writes in metadata topics, and in offsets topics the records of a shard
  leader whose ``kc.epoch`` header is older than the last ``ShardLeader`` marker.
- ``readTimeoutSeconds``: give up on a partition that yields nothing for this long (60).
- ``kafka.<setting>``: any librdkafka consumer setting.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from .options import SourceOptions
from .schema import decoded_schema, raw_schema
from .stream import KafkacoordBatchReader, KafkacoordStreamReader

FORMAT = "kafkacoord"


class KafkacoordDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(dict(self.options))

    def schema(self) -> StructType:
        return decoded_schema() if self._options().decode else raw_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        return KafkacoordStreamReader(self._options())

    def reader(self, schema: StructType) -> DataSourceReader:
        ending = {k.lower(): v for k, v in self.options.items()}.get("endingoffsets", "latest")
        return KafkacoordBatchReader(self._options(), ending)
