"""The rows the source yields, as Spark and Arrow schemas.

Every record type gets one struct column (``<schema name>_record``) holding
its key fields and then its value fields, typed from the codecs' Avro schemas;
only the column of a row's own type is set.
"""

from __future__ import annotations

from functools import cache

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkacoord.codecs import RecordType

from ..avro import record_struct, struct_column

# Where each record came from, as in Spark's own Kafka source.
_KAFKA_FIELDS = [
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("key", BinaryType()),
]


@cache
def raw_schema() -> StructType:
    """``decode=none``: the Kafka coordinates with the key and value bytes."""
    return StructType([*_KAFKA_FIELDS, StructField("value", BinaryType())])


@cache
def decoded_schema() -> StructType:
    """Internal topics: one typed struct per record type, plus skip markers.

    ``error`` is set on a poison record (its typed columns are null) and
    ``fenced`` on a stale controller's decision (metadata topics) or a deposed
    shard leader's record (offsets topics, by its epoch header, so even on its
    poison); both are meant to be skipped, as the daemon's loader skips them.
    """
    fields = [
        *_KAFKA_FIELDS,
        StructField("record_type", StringType()),
        StructField("tombstone", BooleanType()),
        StructField("error", StringType()),
        StructField("fenced", BooleanType()),
    ]
    fields += [StructField(struct_column(t), from_arrow_type(record_struct(t))) for t in RecordType]
    return StructType(fields)


@cache
def arrow_schema(decoded: bool) -> pa.Schema:
    """Exactly the Arrow schema Spark expects of yielded record batches."""
    spark = decoded_schema() if decoded else raw_schema()
    return to_arrow_schema(spark, timezone="UTC")
