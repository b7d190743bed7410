"""Accumulate rows column by column and emit Arrow record batches of the exact schema."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kafkacoord.codecs import RecordType

from ..avro import struct_column
from .schema import arrow_schema

_TYPES = tuple(RecordType)


class ColumnBuilder:
    """Rows of one topic partition; cheap to append, one Arrow batch per flush."""

    def __init__(self, topic: str, partition: int, *, decoded: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.decoded = decoded
        self.schema = arrow_schema(decoded)
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.record_types: list[str | None] = []
        self.tombstones: list[bool | None] = []
        self.errors: list[str | None] = []
        self.fenced: list[bool] = []
        # Per record type: (row index, key fields + value fields) of its rows only.
        self.typed: dict[RecordType, tuple[list[int], list[dict[str, Any]]]] = {
            t: ([], []) for t in _TYPES
        }

    def __len__(self) -> int:
        return len(self.offsets)

    def add_raw(
        self, offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None
    ) -> None:
        self.offsets.append(offset)
        self.timestamps.append(timestamp_ms * 1000)
        self.keys.append(key)
        self.values.append(value)

    def add_record(
        self,
        offset: int,
        timestamp_ms: int,
        key: bytes | None,
        rtype: RecordType,
        fields: dict[str, Any],
        *,
        tombstone: bool,
        fenced: bool,
    ) -> None:
        rows, data = self.typed[rtype]
        rows.append(len(self.offsets))
        data.append(fields)
        self.offsets.append(offset)
        self.timestamps.append(timestamp_ms * 1000)
        self.keys.append(key)
        self.record_types.append(rtype.name)
        self.tombstones.append(tombstone)
        self.errors.append(None)
        self.fenced.append(fenced)

    def add_poison(
        self,
        offset: int,
        timestamp_ms: int,
        key: bytes | None,
        reason: str,
        *,
        fenced: bool = False,
    ) -> None:
        """``fenced``: a deposed shard leader wrote it (the header says so without decoding)."""
        self.offsets.append(offset)
        self.timestamps.append(timestamp_ms * 1000)
        self.keys.append(key)
        self.record_types.append(None)
        self.tombstones.append(None)
        self.errors.append(reason)
        self.fenced.append(fenced)

    def flush(self) -> pa.RecordBatch:
        n = len(self.offsets)
        schema = self.schema
        columns: list[pa.Array] = [
            pa.array([self.topic] * n, schema.field("topic").type),
            pa.array([self.partition] * n, schema.field("partition").type),
            pa.array(self.offsets, schema.field("offset").type),
            pa.array(self.timestamps, schema.field("timestamp").type),
            pa.array(self.keys, schema.field("key").type),
        ]
        if not self.decoded:
            columns.append(pa.array(self.values, schema.field("value").type))
        else:
            columns += [
                pa.array(self.record_types, schema.field("record_type").type),
                pa.array(self.tombstones, schema.field("tombstone").type),
                pa.array(self.errors, schema.field("error").type),
                pa.array(self.fenced, schema.field("fenced").type),
            ]
            for rtype in _TYPES:
                rows, data = self.typed[rtype]
                field = schema.field(struct_column(rtype))
                if not rows:
                    columns.append(pa.nulls(n, field.type))
                    continue
                full: list[dict[str, Any] | None] = [None] * n
                for row, fields in zip(rows, data, strict=True):
                    full[row] = fields
                columns.append(pa.array(full, field.type))
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        self._reset()
        return batch
