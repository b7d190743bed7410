"""The warehouse's physical tables: the folded state of the internal topics.

One table per record type holds each key's latest admitted record, exactly
what the daemon's RocksDB cache holds for the same log, with the record's
position (``shard``, ``log_offset``, ``log_time``). Their columns come from the
codecs' Avro schemas. Beside them: ``leader_epochs`` (the first record of every
leader epoch, for leadership history), ``skipped`` (poison and fenced records
per key), ``end_offsets`` (sampled log end offsets, for lag), ``lag_samples``
(lag over time, :mod:`.lag_history`) and ``metadata_history`` (every metadata
record, :mod:`.metadata_history`, written by its own query).

The views people query are computed from these tables (``kafkacoord.spark.views``).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from kafkacoord.codecs import RecordType

from .avro import record_fields, struct_column
from .lag_history import LAG_SAMPLES
from .lag_history import SCHEMA as LAG_SAMPLES_SCHEMA
from .metadata_history import schema as metadata_history_schema
from .source.options import Role
from .warehouse.history import METADATA_HISTORY
from .warehouse.rows import DELETED, KEY

RECORD_TABLES: Final[dict[RecordType, str]] = {
    RecordType.CONTROLLER: "controller",
    RecordType.NODE: "nodes",
    RecordType.TOPIC: "topics",
    RecordType.PARTITION: "partition_states",
    RecordType.GROUP_METADATA: "group_metadata",
    RecordType.OFFSET_COMMIT: "offset_commits",
    # KIP-848 consumer groups: what the groups views need of them.
    RecordType.CONSUMER_GROUP_METADATA: "consumer_groups",
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "consumer_group_target_epochs",
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: "consumer_group_members",
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "consumer_group_assignments",
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "consumer_group_targets",
}
LEADER_EPOCHS: Final = "leader_epochs"
SKIPPED: Final = "skipped"
END_OFFSETS: Final = "end_offsets"

FENCED_REASON: Final = "fenced: written by a controller older than the newest controller epoch"
LEADER_FENCED_REASON: Final = (
    "fenced: written by a shard leader older than the newest ShardLeader epoch"
)
WINDOW_ENTRY: Final = pa.struct([("offset", pa.int64()), ("commit_timestamp_ms", pa.int64())])
SAMPLE: Final = pa.struct([("sampled_ms", pa.int64()), ("log_end_offset", pa.int64())])

_POSITION: Final = [
    pa.field("shard", pa.int32()),
    pa.field("log_offset", pa.int64()),
    pa.field("log_time", pa.timestamp("ms", tz="UTC")),
]


@cache
def schemas() -> dict[str, pa.Schema]:
    found = {}
    for rtype, table in RECORD_TABLES.items():
        fields = [*record_fields(rtype), *_POSITION]
        if rtype is RecordType.OFFSET_COMMIT:
            # The newest commits of the key, newest first (Burrow's window).
            fields.append(pa.field("window", pa.list_(WINDOW_ENTRY)))
        found[table] = pa.schema(fields)
    partition = {f.name: f for f in record_fields(RecordType.PARTITION)}
    found[LEADER_EPOCHS] = pa.schema(
        [partition[n] for n in ("topic", "partition", "leader_epoch", "leader", "election",
                                "updated_ms", "controller_epoch", "replicas", "isr")]
        + _POSITION
    )  # fmt: skip
    found[SKIPPED] = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("key", pa.binary()),
            ("kind", pa.string()),
            ("records", pa.int64()),
            ("last_offset", pa.int64()),
            ("last_error", pa.string()),
        ]
    )
    found[END_OFFSETS] = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("log_end_offset", pa.int64()),
            ("sampled_ms", pa.int64()),
            ("history", pa.list_(SAMPLE)),  # oldest first
        ]
    )
    found[LAG_SAMPLES] = LAG_SAMPLES_SCHEMA
    found[METADATA_HISTORY] = metadata_history_schema()
    return found


def _text(values: pa.Array) -> pa.Array:
    return pc.cast(pc.cast(values, pa.string()), pa.binary())


def _join(*parts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(*parts, b"\x00")


def changes(fold: pa.Table) -> dict[str, pa.Table]:
    """Table changes (rows with ``_key`` and ``_deleted``) from one batch of the fold.

    ``fold`` is the stateful aggregation's output: one row per key changed in
    the batch with its latest admitted record (``latest``), or per new leader
    epoch (``epoch`` set) with the epoch's first record.
    """
    found: dict[str, pa.Table] = {}
    if fold.num_rows == 0:
        return found
    fold = fold.combine_chunks()
    latest = fold.column("latest")
    is_state = pc.is_null(fold.column("epoch"))
    record_type = pc.struct_field(latest, "record_type")
    for rtype, table in RECORD_TABLES.items():
        mask = pc.and_(is_state, pc.equal(record_type, rtype.name))
        rows = fold.filter(mask)
        if rows.num_rows:
            found[table] = _record_rows(rtype, rows)
    history = fold.filter(pc.invert(is_state))
    if history.num_rows:
        found[LEADER_EPOCHS] = _history_rows(history)
    skipped = fold.filter(pc.greater(fold.column("skipped"), 0))
    if skipped.num_rows:
        found[SKIPPED] = _skipped_rows(skipped)
    return found


def _position(rows: pa.Table, latest: pa.ChunkedArray) -> dict[str, Any]:
    return {
        "shard": rows.column("partition"),
        "log_offset": pc.struct_field(latest, "offset"),
        "log_time": pc.struct_field(latest, "timestamp"),
    }


def _record_rows(rtype: RecordType, rows: pa.Table) -> pa.Table:
    latest = rows.column("latest")
    record = pc.struct_field(latest, struct_column(rtype))
    columns: dict[str, Any] = {
        KEY: _join(_text(rows.column("partition")), rows.column("key")),
        DELETED: pc.struct_field(latest, "tombstone"),
    }
    for field in record_fields(rtype):
        columns[field.name] = pc.struct_field(record, field.name)
    columns.update(_position(rows, latest))
    if rtype is RecordType.OFFSET_COMMIT:
        columns["window"] = rows.column("window")
    return pa.table(columns)


def _history_rows(rows: pa.Table) -> pa.Table:
    latest = rows.column("latest")
    record = pc.struct_field(latest, struct_column(RecordType.PARTITION))
    columns: dict[str, Any] = {
        KEY: _join(
            _text(rows.column("partition")), rows.column("key"), _text(rows.column("epoch"))
        ),
        DELETED: pa.array([False] * rows.num_rows, pa.bool_()),
    }
    for name in schemas()[LEADER_EPOCHS].names:
        if name not in ("shard", "log_offset", "log_time"):
            columns[name] = pc.struct_field(record, name)
    columns.update(_position(rows, latest))
    return pa.table(columns)


def _skipped_rows(rows: pa.Table) -> pa.Table:
    last = rows.column("last_skipped")
    key = pc.fill_null(rows.column("key"), b"")
    fenced = pc.fill_null(pc.struct_field(last, "fenced"), False)
    # Offsets topics are fenced by shard leader epochs, metadata topics by controller
    # epochs: the source's own topic roles decide which.
    reason = pa.array(
        [
            LEADER_FENCED_REASON if Role.of(topic) is Role.OFFSETS else FENCED_REASON
            for topic in rows.column("topic").to_pylist()
        ],
        pa.string(),
    )
    return pa.table(
        {
            KEY: _join(
                pc.cast(rows.column("topic"), pa.binary()), _text(rows.column("partition")), key
            ),
            DELETED: pa.array([False] * rows.num_rows, pa.bool_()),
            "topic": rows.column("topic"),
            "partition": rows.column("partition"),
            "key": rows.column("key"),
            "kind": pc.if_else(fenced, "fenced", "poison"),
            "records": rows.column("skipped"),
            "last_offset": pc.struct_field(last, "offset"),
            "last_error": pc.if_else(fenced, reason, pc.struct_field(last, "error")),
        }
    )
