"""Arrow types of the codecs' Avro records, shared by the source and the tables.

Derived from the packaged ``.avsc`` files, so a schema change in
``kafkacoord.codecs`` reaches the typed columns and tables with no edit here.
No pyspark import: the warehouse readers must not need it.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

import pyarrow as pa

from kafkacoord.codecs import SPECS, RecordType
from kafkacoord.codecs import schemas as avro_schemas

_PRIMITIVES: Final[dict[str, pa.DataType]] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def arrow_type(avro: Any, named: dict[str, pa.DataType] | None = None) -> pa.DataType:
    """The Arrow type of an Avro type (as JSON); ``["null", X]`` is a nullable X. ``named``
    collects the records defined so far, which later fields may name (Avro's reuse)."""
    named = {} if named is None else named
    if isinstance(avro, str):
        if avro in named:
            return named[avro]
        return _PRIMITIVES[avro]
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"only [null, X] unions are supported, not {avro}")
        return arrow_type(branches[0], named)
    kind = avro["type"]
    if kind == "record":
        struct = pa.struct([(f["name"], arrow_type(f["type"], named)) for f in avro["fields"]])
        named[avro["name"]] = struct
        if "namespace" in avro:
            named[f"{avro['namespace']}.{avro['name']}"] = struct
        return struct
    if kind == "array":
        return pa.list_(arrow_type(avro["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(avro["values"], named))
    if kind == "enum":
        return pa.string()
    return arrow_type(kind, named)


def _current(name: str) -> dict[str, Any]:
    return avro_schemas.raw(name, max(avro_schemas.versions(name)))


@cache
def record_fields(rtype: RecordType) -> tuple[pa.Field, ...]:
    """Key fields, then the value fields not already in the key (they repeat the key)."""
    spec = SPECS[rtype]
    key = _current(f"{spec.schema_name}_key")["fields"]
    value = _current(f"{spec.schema_name}_value")["fields"]
    names = {f["name"] for f in key}
    fields = [*key, *(f for f in value if f["name"] not in names)]
    named: dict[str, pa.DataType] = {}
    return tuple(pa.field(f["name"], arrow_type(f["type"], named)) for f in fields)


def record_struct(rtype: RecordType) -> pa.StructType:
    return pa.struct(list(record_fields(rtype)))


def struct_column(rtype: RecordType) -> str:
    """The source column holding records of ``rtype``."""
    return f"{SPECS[rtype].schema_name}_record"
