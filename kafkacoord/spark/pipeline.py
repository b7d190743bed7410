"""The streaming fold: the internal topics reduced to each key's latest admitted record.

One stateful aggregation (RocksDB state store) over the decoded source, keyed
by the record's (topic, partition, key), in update mode, so each micro-batch
emits only the keys it changed:

- ``latest``: the newest admitted record of the key (``max_by`` over the log
  offset). Poison and fenced records never win, so an undecodable value leaves
  the previous good record in place, as the loader does.
- ``window``: the key's last commits, newest first (``max_by(..., k)``), for
  Burrow's evaluation.
- ``skipped`` / ``last_skipped``: how many records of the key were skipped.

Partition records are also fed in a second time, keyed by their leader epoch
too, keeping each epoch's first record (``max_by`` over the negated offset): the
leadership history, in the same state and the same pass over the log.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)

from kafkacoord.codecs import RecordType

from .avro import struct_column
from .tables import RECORD_TABLES

WINDOW: Final = 10
_GROUP_KEY: Final = ("topic", "partition", "key", "epoch")


def fold(source: DataFrame, window: int = WINDOW) -> DataFrame:
    valid = F.col("error").isNull() & ~F.col("fenced")
    partition_record = F.col(struct_column(RecordType.PARTITION))
    elects = valid & (F.col("record_type") == RecordType.PARTITION.name) & ~F.col("tombstone")
    no_epoch = F.lit(None).cast("int")
    rows = source.withColumn(
        "epoch",
        F.explode(
            F.when(elects, F.array(no_epoch, partition_record["leader_epoch"])).otherwise(
                F.array(no_epoch)
            )
        ),
    )
    history = F.col("epoch").isNotNull()
    offset = F.col("offset")
    # History rows keep their epoch's first record: the newest by negated offset.
    order = F.when(valid, F.when(history, -offset).otherwise(offset))
    commit = (
        valid
        & ~history
        & (F.col("record_type") == RecordType.OFFSET_COMMIT.name)
        & ~F.col("tombstone")
    )
    commit_record = F.col(struct_column(RecordType.OFFSET_COMMIT))
    latest = F.struct(
        "offset",
        "timestamp",
        "record_type",
        "tombstone",
        *(struct_column(t) for t in RECORD_TABLES),
    )
    return rows.groupBy(*_GROUP_KEY).agg(
        F.max_by(latest, order).alias("latest"),
        F.max_by(
            _only(
                commit,
                F.struct(
                    commit_record["offset"].alias("offset"),
                    commit_record["commit_timestamp_ms"].alias("commit_timestamp_ms"),
                ),
            ),
            _only(commit, offset),
            window,
        ).alias("window"),
        F.count_if(~valid).alias("skipped"),
        F.max_by(_only(~valid, F.struct("offset", "error", "fenced")), _only(~valid, offset)).alias(
            "last_skipped"
        ),
    )


def _only(condition: Column, value: Column) -> Column:
    # max_by ignores rows whose ordering is null.
    return F.when(condition, value)
