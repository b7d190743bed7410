"""``metadata_history``: every admitted metadata record, one row each, causes resolved.

The fold keeps each key's latest record; this table keeps them all (nodes,
topics, partitions, rebalances, decisions, the controller), with the log
position, the record's fields (one struct column per record type) and, for
partition and node records, their cause: the decision id, the election rule,
and the decision's trigger joined from its decision record. The controller
writes a decision record before the first record naming it, in the same log,
so the decision is in the same micro-batch or already in the table.

A second streaming query feeds it from the metadata topic alone (stateless,
one append per batch), so the fold's state and batches stay as they were.
Poison and fenced records are left out (the fold counts them in ``skipped``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from kafkacoord.codecs import RecordType

from .avro import record_struct, struct_column
from .warehouse import DELETED, KEY, AlreadyAppliedError, Warehouse
from .warehouse.history import METADATA_HISTORY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = structlog.get_logger(__name__)

QUERY: Final = "metadata_history"
METADATA_TYPES: Final = (
    RecordType.CONTROLLER,
    RecordType.NODE,
    RecordType.TOPIC,
    RecordType.PARTITION,
    RecordType.REBALANCE,
    RecordType.DECISION,
)
DECISION_ID: Final = ("decision_controller_epoch", "decision_sequence")

# Decision ids -> their rows (DECISION_ID, trigger_*, decided_ms) from the table.
DecisionLookup = Callable[[pa.Table], pa.Table]


@cache
def _trigger() -> pa.StructType:
    trigger = record_struct(RecordType.DECISION).field("trigger").type
    assert isinstance(trigger, pa.StructType)
    return trigger


@cache
def cause_schema() -> pa.Schema:
    """The resolved cause: the decision's id, the rule, the decision's trigger."""
    decision = record_struct(RecordType.DECISION)
    return pa.schema(
        [
            pa.field(DECISION_ID[0], decision.field("controller_epoch").type),
            pa.field(DECISION_ID[1], decision.field("sequence").type),
            pa.field("rule", pa.string()),
            *(pa.field(f"trigger_{f.name}", f.type) for f in _trigger()),
            pa.field("decided_ms", decision.field("decided_ms").type),
        ]
    )


@cache
def schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("shard", pa.int32()),
            pa.field("log_offset", pa.int64()),
            pa.field("log_time", pa.timestamp("ms", tz="UTC")),
            pa.field("record_type", pa.string()),
            pa.field("tombstone", pa.bool_()),
            pa.field("key", pa.binary()),
            *(pa.field(struct_column(t), record_struct(t)) for t in METADATA_TYPES),
            *cause_schema(),
        ]
    )


def _trigger_names() -> list[str]:
    return [f"trigger_{f.name}" for f in _trigger()] + ["decided_ms"]


def history_rows(source: pa.Table, stored: DecisionLookup) -> pa.Table:
    """``metadata_history`` rows (with ``_key``) of one batch of decoded source rows."""
    names = [t.name for t in METADATA_TYPES]
    admitted = pc.and_(
        pc.and_(pc.is_null(source.column("error")), pc.invert(source.column("fenced"))),
        pc.is_in(source.column("record_type"), value_set=pa.array(names)),
    )
    rows = source.filter(admitted)
    if rows.num_rows == 0:
        return pa.table({})
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "shard": rows.column("partition"),
        "log_offset": rows.column("offset"),
        "log_time": rows.column("timestamp"),
        "record_type": rows.column("record_type"),
        "tombstone": rows.column("tombstone"),
        "key": rows.column("key"),
    }
    for rtype in METADATA_TYPES:
        columns[struct_column(rtype)] = rows.column(struct_column(rtype))
    partition = rows.column(struct_column(RecordType.PARTITION))
    node = rows.column(struct_column(RecordType.NODE))
    decision = rows.column(struct_column(RecordType.DECISION))
    # A decision record's own id, a partition's cause, a node's last decision.
    named = [
        pc.struct_field(pc.struct_field(partition, "cause"), "decision"),
        pc.struct_field(node, "decision"),
    ]
    for name, field in zip(DECISION_ID, ("controller_epoch", "sequence"), strict=True):
        columns[name] = pc.coalesce(
            pc.struct_field(decision, field), *(pc.struct_field(d, field) for d in named)
        )
    columns["rule"] = pc.struct_field(pc.struct_field(partition, "cause"), "rule")
    table = pa.table(columns)
    decisions = _decisions(table, stored)
    triggers = _lookup(table, decisions)
    for name in _trigger_names():
        table = table.append_column(name, triggers.column(name))
    table = table.add_column(0, KEY, _keys(table))
    return table.add_column(1, DELETED, pa.array([False] * table.num_rows, pa.bool_()))


def _decisions(batch: pa.Table, stored: DecisionLookup) -> pa.Table:
    """The triggers of the decisions ``batch`` names: its own decision records first,
    the table's for decisions logged in earlier batches."""
    is_decision = pc.and_(
        pc.equal(batch.column("record_type"), RecordType.DECISION.name),
        pc.invert(batch.column("tombstone")),
    )
    own = batch.filter(is_decision)
    record = own.column(struct_column(RecordType.DECISION))
    trigger = pc.struct_field(record, "trigger")
    found = pa.table(
        {
            DECISION_ID[0]: own.column(DECISION_ID[0]),
            DECISION_ID[1]: own.column(DECISION_ID[1]),
            **{f"trigger_{f.name}": pc.struct_field(trigger, f.name) for f in _trigger()},
            "decided_ms": pc.struct_field(record, "decided_ms"),
        }
    )
    wanted = batch.select(list(DECISION_ID)).filter(pc.is_valid(batch.column(DECISION_ID[1])))
    missing = wanted.filter(pc.invert(pc.is_in(_ids(wanted), value_set=_ids(found))))
    if missing.num_rows:
        earlier = stored(missing)
        if earlier.num_rows:
            found = pa.concat_tables([found, earlier.select(found.column_names).cast(found.schema)])
    return found


def _lookup(batch: pa.Table, decisions: pa.Table) -> pa.Table:
    """Per row of ``batch``, its decision's trigger columns (null where none is known)."""
    index = pc.index_in(_ids(batch), value_set=_ids(decisions))
    return pa.table({name: pc.take(decisions.column(name), index) for name in _trigger_names()})


def _ids(rows: pa.Table) -> pa.Array:
    # One string per decision id, for set lookups.
    return pc.binary_join_element_wise(
        pc.cast(rows.column(DECISION_ID[0]), pa.string()),
        pc.cast(rows.column(DECISION_ID[1]), pa.string()),
        ":",
    ).combine_chunks()


def _keys(rows: pa.Table) -> pa.Array:
    return pc.cast(
        pc.binary_join_element_wise(
            pc.cast(rows.column("shard"), pa.string()),
            pc.cast(rows.column("log_offset"), pa.string()),
            ":",
        ),
        pa.binary(),
    ).combine_chunks()


def stored_decisions(warehouse: Warehouse) -> DecisionLookup:
    """Look decisions up in the warehouse's ``metadata_history`` (newest version)."""

    def lookup(wanted: pa.Table) -> pa.Table:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dataset = DeltaTable(warehouse.path(METADATA_HISTORY)).to_pyarrow_dataset()
        except TableNotFoundError:
            return pa.table({})
        sequences = pc.unique(wanted.column(DECISION_ID[1]).combine_chunks())
        condition = (pc.field("record_type") == RecordType.DECISION.name) & pc.field(
            DECISION_ID[1]
        ).isin(sequences)
        rows = dataset.to_table(
            columns=[*DECISION_ID, *_trigger_names(), "tombstone"], filter=condition
        )
        rows = rows.filter(pc.invert(rows.column("tombstone")))
        return rows.filter(pc.is_in(_ids(rows), value_set=_ids(wanted)))

    return lookup


class MetadataHistoryWriter:
    """The ``foreachBatch`` function of the metadata history query: one append a batch,
    exactly once (the batch id is the Delta transaction, as in the fold's writer)."""

    def __init__(self, warehouse: Warehouse, *, query: str = QUERY) -> None:
        self.warehouse = warehouse
        self.query = query
        self._stored = stored_decisions(warehouse)
        self.rows = 0

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.apply(batch.toArrow(), batch_id)

    def apply(self, source: pa.Table, batch_id: int) -> None:
        rows = history_rows(source, self._stored)
        if rows.num_rows == 0:
            return
        try:
            self.warehouse.commit({}, {METADATA_HISTORY: schema()}, query=self.query,
                                  batch=batch_id, append={METADATA_HISTORY: rows})  # fmt: skip
        except AlreadyAppliedError:
            log.info("metadata history batch already in the warehouse; skipped", batch=batch_id)
            return
        self.rows += rows.num_rows
