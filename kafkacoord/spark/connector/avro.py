"""kafkacoord's record framing, unwrapped in Spark SQL and decoded with spark-avro.

Key bytes are ``[record type: u8][key version: u8][Avro body]`` and value bytes
``[value version: u16 big-endian][Avro body]`` (:mod:`kafkacoord.codecs.records`).
The header is cut off with ``substring``, and the record type and version pick
the writer schema. An older value version is lifted to the newest layout with
the newest schema's field defaults, as Avro schema resolution does in the codecs.

A body is valid when ``from_avro`` reads it (PERMISSIVE mode gives nulls
otherwise), its strings are valid UTF-8, and encoding the datum again gives back
exactly the bytes read: Spark's reader ignores trailing bytes and reads a boolean
byte other than 0 or 1 differently, where the codecs reject or read otherwise.

Each body is decoded once per row, and by one ``from_avro`` for every key and one
for every value (:class:`UnionDecoder`): each task builds every ``from_avro``
expression's options anew, a Hadoop configuration read from its XML files, so
forty expressions (one per schema version) cost a task far more than its rows.
The union's branch is the (record type, version) pair, and Avro encodes a union
value as its branch index followed by the branch's body, so the frame header is
replaced by that index. The decoded unions are columns of their own (Spark does
not inline a projection that would evaluate them twice), and validity and the
typed struct read their members.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import cache, partial
from typing import Any, Final

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructField, StructType

from kafkacoord.codecs import SPECS, RecordType
from kafkacoord.codecs import schemas as avro_schemas

from ..avro import arrow_type

KEY_HEADER: Final = 2
VALUE_HEADER: Final = 2
_PERMISSIVE: Final = {"mode": "PERMISSIVE"}


def unsigned(data: Column, start: int, length: int) -> Column:
    """``length`` bytes of ``data`` from ``start`` (1-based), an unsigned big-endian int."""
    return F.conv(F.hex(F.substring(data, start, length)), 16, 10).cast("int")


def body(data: Column, header: int) -> Column:
    """The Avro body after a ``header``-byte frame header."""
    return F.substring(data, F.lit(header + 1), F.octet_length(data))


def key_type(key: Column) -> Column:
    """The record type tag, the key's first byte."""
    return unsigned(key, 1, 1)


def key_version(key: Column) -> Column:
    return unsigned(key, 2, 1)


def value_version(value: Column) -> Column:
    return unsigned(value, 1, VALUE_HEADER)


@cache
def _raw(name: str, version: int) -> dict[str, Any]:
    return avro_schemas.raw(name, version)


class Schema:
    """One version of one key or value schema, and the column its datums land in."""

    def __init__(self, name: str, version: int, column: str) -> None:
        self.name = name
        self.version = version
        self.column = column
        self.fields: list[dict[str, Any]] = _raw(name, version)["fields"]
        spark_type = from_arrow_type(arrow_type(_raw(name, version)))
        assert isinstance(spark_type, StructType)
        self.spark_type = spark_type

    def has(self, name: str) -> bool:
        return any(f["name"] == name for f in self.fields)


def utf8(value: Column, spark_type: DataType) -> Column:
    """Every string inside ``value`` is valid UTF-8 (nulls pass)."""
    if not _has_strings(spark_type):
        return F.lit(True)
    if isinstance(spark_type, StringType):
        check = F.call_function("is_valid_utf8", value)
    elif isinstance(spark_type, StructType):
        check = _all(utf8(value[f.name], f.dataType) for f in spark_type.fields)
    elif isinstance(spark_type, ArrayType):
        item = spark_type.elementType
        check = F.forall(value, lambda x: utf8(x, item))
    else:
        assert isinstance(spark_type, MapType)
        key_t, value_t = spark_type.keyType, spark_type.valueType
        check = F.forall(F.map_keys(value), lambda x: utf8(x, key_t)) & F.forall(
            F.map_values(value), lambda x: utf8(x, value_t)
        )
    return F.coalesce(check, F.lit(True))


def _has_strings(spark_type: DataType) -> bool:
    if isinstance(spark_type, StringType | MapType):
        return True
    if isinstance(spark_type, StructType):
        return any(_has_strings(f.dataType) for f in spark_type.fields)
    if isinstance(spark_type, ArrayType):
        return _has_strings(spark_type.elementType)
    return False


def _all(checks: Iterable[Column]) -> Column:
    result = F.lit(True)
    for check in checks:
        result = result & check
    return result


def _by_version(version: Column, schemas: list[Schema], each: Callable[[Schema], Column],
                missing: Column) -> Column:  # fmt: skip
    """``each(schema)`` for the schema whose version ``version`` names, else ``missing``."""
    branches: Column | None = None
    for schema in schemas:
        hit = version == schema.version
        branches = (F.when(hit, each(schema)) if branches is None
                    else branches.when(hit, each(schema)))  # fmt: skip
    assert branches is not None
    return branches.otherwise(missing)


_PRIMITIVES: Final = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _namespaced(schema: Any, prefix: str, namespace: str = "") -> Any:
    """``schema`` with every named type moved under namespace ``prefix``, so versions of
    one record can be branches of one union (Avro forbids two branches of one name)."""
    if isinstance(schema, list):
        return [_namespaced(s, prefix, namespace) for s in schema]
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        return f"{prefix}.{full}"  # a reference to a named type
    kind = schema["type"]
    if kind in ("record", "enum", "fixed"):
        name = schema["name"]
        own = name.rsplit(".", 1)[0] if "." in name else schema.get("namespace", namespace)
        out = {**schema, "name": name.rsplit(".", 1)[-1],
               "namespace": f"{prefix}.{own}" if own else prefix}  # fmt: skip
        if kind == "record":
            out["fields"] = [{**f, "type": _namespaced(f["type"], prefix, own)}
                             for f in schema["fields"]]  # fmt: skip
        return out
    if kind == "array":
        return {**schema, "items": _namespaced(schema["items"], prefix, namespace)}
    if kind == "map":
        return {**schema, "values": _namespaced(schema["values"], prefix, namespace)}
    return {**schema, "type": _namespaced(kind, prefix, namespace)}


class UnionDecoder:
    """Every schema version of keys (or of values) as the branches of one Avro union."""

    def __init__(self, branches: list[tuple[RecordType, Schema]], column: str) -> None:
        assert len(branches) < 64  # a branch index is then one zig-zag varint byte
        self.branches = branches
        self.column = column
        union = [_namespaced(_raw(s.name, s.version), f"kcb{i}")
                 for i, (_, s) in enumerate(branches)]  # fmt: skip
        self.spark_type = StructType(
            [StructField(f"member{i}", schema.spark_type) for i, (_, schema) in enumerate(branches)]
        )
        # spark-avro reads and writes a record, not a bare union: one field, encoded as
        # its value.
        self.json = json.dumps(
            {
                "type": "record",
                "name": "Branches",
                "namespace": "kafkacoord.spark",
                "fields": [{"name": "u", "type": union}],
            }
        )

    def framed(self, kind: Column, version: Column, data: Column) -> Column:
        """``data``, a body, prefixed with the index of its branch (null for none)."""
        index: Column | None = None
        for i, (rtype, schema) in enumerate(self.branches):
            hit = (kind == int(rtype)) & (version == schema.version)
            tag = F.lit(bytes([2 * i]))
            index = F.when(hit, tag) if index is None else index.when(hit, tag)
        assert index is not None
        return F.concat(index, data)

    def decoded(self, framed: Column) -> Column:
        return from_avro(framed, self.json, _PERMISSIVE)

    def members(self) -> dict[str, Column]:
        """Each schema version's datum: the union's member, null on other rows."""
        return {schema.column: F.col(self.column)["u"][f"member{i}"]
                for i, (_, schema) in enumerate(self.branches)}  # fmt: skip

    def valid(self, framed: Column) -> Column:
        """The codecs read exactly the decoded datum from ``framed``: it decoded (PERMISSIVE
        gives nulls otherwise), its strings are UTF-8, and it encodes back to the bytes."""
        union = F.col(self.column)["u"]
        read = union.isNotNull()
        same = F.when(read, to_avro(F.col(self.column), self.json) == framed)
        return F.coalesce(read & same & utf8(union, self.spark_type), F.lit(False))


class RecordFormat:
    """Keys and values of one record type, in every schema version."""

    def __init__(self, rtype: RecordType) -> None:
        spec = SPECS[rtype]
        self.rtype = rtype
        key_name, value_name = f"{spec.schema_name}_key", f"{spec.schema_name}_value"
        tag = int(rtype)
        self.keys = [Schema(key_name, v, f"_k{tag}v{v}") for v in avro_schemas.versions(key_name)]
        self.values = [
            Schema(value_name, v, f"_v{tag}v{v}") for v in avro_schemas.versions(value_name)
        ]
        self.current = self.values[-1]

    def record(self, key: Column, value: Column, spark_type: StructType) -> Column:
        """The source's struct column: key fields, then value fields (a key field wins)."""
        fields = []
        for field in spark_type.fields:
            name = field.name
            if any(s.has(name) for s in self.keys):
                column = _by_version(key_version(key), self.keys, _getter(name), F.lit(None))
            else:
                column = _by_version(value_version(value), self.values,
                                     partial(self._lifted, name=name), F.lit(None))  # fmt: skip
            fields.append(column.cast(field.dataType).alias(name))
        return F.struct(*fields)

    def _lifted(self, schema: Schema, *, name: str) -> Column:
        """Field ``name`` of the newest layout, from a datum written with ``schema``."""
        if schema.has(name):
            return F.col(schema.column)[name]
        field = next(f for f in self.current.fields if f["name"] == name)
        if "default" not in field:
            raise ValueError(
                f"{self.current.name} field {name} has no default to read v{schema.version} with"
            )
        return default(field["default"], self.current.spark_type[name].dataType)


def _getter(name: str) -> Callable[[Schema], Column]:
    def get(schema: Schema) -> Column:
        return F.col(schema.column)[name]

    return get


def default(value: Any, spark_type: DataType) -> Column:
    """An Avro field default as a Spark literal of the field's type."""
    if value is None:
        return F.lit(None).cast(spark_type)
    if value == []:
        return F.array().cast(spark_type)
    if value == {}:
        return F.create_map().cast(spark_type)
    if isinstance(value, list | dict):
        raise ValueError(f"non-empty collection defaults are not supported: {value!r}")
    return F.lit(value).cast(spark_type)


FORMATS: Final = {rtype: RecordFormat(rtype) for rtype in RecordType}


KEYS: Final = UnionDecoder([(t, k) for t, f in FORMATS.items() for k in f.keys], "_keys")
VALUES: Final = UnionDecoder([(t, v) for t, f in FORMATS.items() for v in f.values], "_values")


def framed(kind: Column, key: Column, value: Column) -> dict[str, Column]:
    """The key's and the value's body, each prefixed with its union branch."""
    return {
        "_kframed": KEYS.framed(kind, key_version(key), body(key, KEY_HEADER)),
        "_vframed": VALUES.framed(kind, value_version(value), body(value, VALUE_HEADER)),
    }


def datums() -> tuple[dict[str, Column], dict[str, Column]]:
    """Two projections over :func:`framed`, in order: the decoded unions (each a column
    of its own, so decoded once), then every schema version's datum."""
    keys, values = F.col("_kframed"), F.col("_vframed")
    unions = {KEYS.column: KEYS.decoded(keys),
              VALUES.column: F.when(values.isNotNull(), VALUES.decoded(values))}  # fmt: skip
    return unions, {**KEYS.members(), **VALUES.members()}


def key_valid() -> Column:
    return KEYS.valid(F.col("_kframed"))


def value_valid() -> Column:
    return VALUES.valid(F.col("_vframed"))
