"""The fenced rows of the connector pipeline, decoded into the Python source's exact rows.

Input: the fence stage's output (raw key and value, ``kind``, ``fence_epoch``,
``admitted``). Output: the columns of :func:`kafkacoord.spark.source.schema.decoded_schema`
with the same values the Python source yields for the same records, so the
fold and every view downstream are shared:

- a record is poison when its key or value does not decode, has an unknown
  type or version, or its type does not belong in the topic; ``error`` holds
  the codecs' reason and every typed column is null;
- a tombstone sets its key fields only;
- ``fenced``: on offsets topics, what the leader fence rejected (poison
  included); on metadata topics, a decoded, non-tombstone record whose
  controller epoch is older than the epoch in force (a ``ControllerValue``'s
  own epoch, or a decision's ``controller_epoch``).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)
from pyspark.sql.types import StructType

from kafkacoord.codecs import RecordType

from ..avro import struct_column
from ..source.options import Role
from ..source.schema import decoded_schema
from .avro import FORMATS, datums, framed, key_valid, value_valid
from .poison import poison_reason

_EPOCH_FIELD: Final = "controller_epoch"


def _case(kind: Column, each: dict[RecordType, Column], missing: Column) -> Column:
    branches: Column | None = None
    for rtype, value in each.items():
        hit = kind == int(rtype)
        branches = F.when(hit, value) if branches is None else branches.when(hit, value)
    assert branches is not None
    return branches.otherwise(missing)


def _role(topic: Column, role: Role) -> Column:
    # As Role.of: the internal topics are named <prefix>metadata and <prefix>offsets.
    if role is Role.METADATA:
        return topic.endswith("metadata")
    if role is Role.OFFSETS:
        return ~topic.endswith("metadata") & topic.endswith("offsets")
    return ~topic.endswith("metadata") & ~topic.endswith("offsets")


def _allowed(topic: Column, kind: Column) -> Column:
    checks = [_role(topic, role) & kind.isin([int(t) for t in role.allowed]) for role in Role]
    return F.coalesce(checks[0] | checks[1] | checks[2], F.lit(False))


def _fenced(topic: Column, kind: Column, value: Column, good: Column, epoch: Column) -> Column:
    """Offsets topics: the leader fence's verdict; metadata: a stale controller epoch."""
    schema = decoded_schema()
    stamped = {RecordType.CONTROLLER: F.col(struct_column(RecordType.CONTROLLER))["epoch"]}
    for rtype in sorted(Role.METADATA.allowed - {RecordType.CONTROLLER}):
        spark_type = schema[struct_column(rtype)].dataType
        assert isinstance(spark_type, StructType)
        if _EPOCH_FIELD in spark_type.fieldNames():
            stamped[rtype] = F.col(struct_column(rtype))[_EPOCH_FIELD]
    stale = F.coalesce(_case(kind, stamped, F.lit(None)) < epoch, F.lit(False))
    return (
        F.when(_role(topic, Role.OFFSETS), ~F.col("admitted"))
        .when(_role(topic, Role.METADATA), good & value.isNotNull() & stale)
        .otherwise(F.lit(False))
    )


def decode(staged: DataFrame) -> DataFrame:
    topic, kind = F.col("topic"), F.col("kind")
    key, value = F.col("key"), F.col("value")
    unions, members = datums()
    rows = staged.withColumns(framed(kind, key, value)).withColumns(unions).withColumns(members)

    key_ok = (F.octet_length(key) >= 2) & key_valid()
    value_ok = value.isNull() | ((F.octet_length(value) >= 2) & value_valid())
    bad = ~F.coalesce(key_ok & _allowed(topic, kind) & value_ok, F.lit(False))
    rows = rows.withColumn("_bad", bad)
    good = ~F.col("_bad")

    schema = decoded_schema()
    records = {}
    for rtype, fmt in FORMATS.items():
        column = struct_column(rtype)
        spark_type = schema[column].dataType
        assert isinstance(spark_type, StructType)
        records[column] = F.when(good & (kind == int(rtype)),
                                 fmt.record(key, value, spark_type))  # fmt: skip

    epoch = F.col("fence_epoch")
    record_type = _case(kind, {t: F.lit(t.name) for t in RecordType}, F.lit(None))
    timestamp = F.col("timestamp")
    epoch_start = F.lit(0).cast("timestamp")
    decoded = rows.select(
        topic,
        F.col("partition"),
        F.col("offset"),
        F.when(timestamp < epoch_start, epoch_start).otherwise(timestamp).alias("timestamp"),
        key,
        value,
        kind,
        F.when(good, record_type).alias("record_type"),
        F.when(good, value.isNull()).alias("tombstone"),
        poison_reason(topic, F.col("offset"), F.col("_bad"), key, value).alias("error"),
        F.col("admitted"),
        epoch,
        F.col("_bad"),
        *(c.alias(n) for n, c in records.items()),
    ).withColumn("fenced", _fenced(topic, kind, value, good, epoch))
    return decoded.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields))
