"""What a batch hands the warehouse: keyed rows, tombstones, and columns made to fit."""

from __future__ import annotations

from typing import Final

import pyarrow as pa

# Every change row carries its primary key (bytes) and whether it deletes the key.
KEY: Final = "_key"
DELETED: Final = "_deleted"


class AlreadyAppliedError(Exception):
    """The micro-batch is already in the warehouse (a replay after a crash)."""


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns in ``schema`` order and types (missing ones null), whatever Spark produced."""
    columns = []
    for f in schema:
        if f.name in table.column_names:
            columns.append(table.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)
