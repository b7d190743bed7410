"""metadata_history: every metadata record with its cause resolved, and reads as of an instant,
on real Delta tables written by the warehouse (no Spark)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from kafkacoord.codecs import RecordType, encode_key, encode_value
from kafkacoord.codecs.models.metadata import (
    Cause,
    DecisionKey,
    DecisionValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    TopicKey,
    TopicValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.spark.metadata_history import MetadataHistoryWriter
from kafkacoord.spark.source.columns import ColumnBuilder
from kafkacoord.spark.source.decode import PoisonError, RecordDecoder
from kafkacoord.spark.source.options import Role
from kafkacoord.spark.warehouse import Warehouse
from kafkacoord.spark.warehouse.history import (
    METADATA_HISTORY,
    metadata_as_of,
    metadata_history,
    read_table,
)

T0 = 1_700_000_000_000
FENCING = DecisionKey(controller_epoch=3, sequence=41)
SHUTDOWN = DecisionKey(controller_epoch=3, sequence=42)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def source_rows(
    records: list[tuple[int, int, Any, Any]], *, poison_at: int | None = None
) -> pa.Table:
    """Decoded source rows, as the data source yields them: (offset, time, key, value)."""
    builder = ColumnBuilder("__kc_metadata", 0, decoded=True)
    decoder = RecordDecoder(Role.METADATA.allowed)
    for offset, at, key, value in records:
        raw_key = encode_key(key)
        rtype, fields = decoder.key(raw_key)
        if value is not None:
            fields = {**decoder.value(rtype, encode_value(value)), **fields}
        builder.add_record(offset, at, raw_key, rtype, fields, tombstone=value is None,
                           fenced=False)  # fmt: skip
    if poison_at is not None:
        with pytest.raises(PoisonError) as bad:
            decoder.key(b"\x63garbage")
        builder.add_poison(poison_at, T0, b"\x63garbage", bad.value.reason)
    return pa.Table.from_batches([builder.flush()])


def partition(leader: int, epoch: int, cause: DecisionKey | None, rule: str = "") -> PartitionValue:
    return PartitionValue(
        topic="orders", partition=0, state=PartitionState.ONLINE, replicas=(1, 2), isr=(leader,),
        leader=leader, leader_epoch=epoch, partition_epoch=epoch, updated_ms=T0,
        controller_epoch=3, cause=None if cause is None else Cause(cause, rule),
    )  # fmt: skip


def node(fenced: bool, decision: DecisionKey | None) -> NodeValue:
    return NodeValue(node_id=2, incarnation="inc", node_epoch=7, fenced=fenced,
                     registered_ms=T0, controller_epoch=3, decision=decision)  # fmt: skip


def batches() -> list[pa.Table]:
    topic = TopicValue("orders", TOPIC_ID, 1, 2, T0, 3)
    first = [
        (0, T0, TopicKey("orders"), topic),
        (1, T0 + 1_000, PartitionKey("orders", 0), partition(2, 1, None)),
        (2, T0 + 2_000, FENCING, DecisionValue(
            Trigger(TriggerKind.SESSION_EXPIRED, node_id=2, heartbeat_ms=T0 + 500), T0 + 2_000, 3)),
        (3, T0 + 2_000, NodeKey(2), node(True, FENCING)),
        (4, T0 + 2_000, PartitionKey("orders", 0), partition(1, 2, FENCING, "clean")),
    ]  # fmt: skip
    second = [  # names a decision logged in the first batch, and one of its own
        (6, T0 + 5_000, SHUTDOWN, DecisionValue(
            Trigger(TriggerKind.ADMIN_REQUEST, principal="User:ops", request_id="r-9", api="x"),
            T0 + 5_000, 3)),
        (7, T0 + 5_000, NodeKey(2), node(False, FENCING)),
        (8, T0 + 6_000, PartitionKey("orders", 0), partition(2, 3, SHUTDOWN, "preferred")),
        (9, T0 + 7_000, TopicKey("orders"), None),
    ]  # fmt: skip
    return [source_rows(first, poison_at=5), source_rows(second)]


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    writer = MetadataHistoryWriter(wh)
    for batch_id, rows in enumerate(batches()):
        writer.apply(rows, batch_id)
    return wh


def by_offset(table: pa.Table) -> dict[int, dict[str, Any]]:
    return {row["log_offset"]: row for row in table.to_pylist()}


def test_every_admitted_record_is_a_row_with_its_cause_resolved(warehouse: Warehouse) -> None:
    rows = by_offset(metadata_history(warehouse.root))
    assert sorted(rows) == [0, 1, 2, 3, 4, 6, 7, 8, 9]  # the poison record at 5 is not
    fenced = rows[4]
    assert fenced["record_type"] == RecordType.PARTITION.name
    assert fenced["partition_record"]["leader"] == 1
    assert (fenced["decision_controller_epoch"], fenced["decision_sequence"], fenced["rule"]) == (
        3, 41, "clean")  # fmt: skip
    assert (fenced["trigger_kind"], fenced["trigger_node_id"], fenced["trigger_heartbeat_ms"]) == (
        "session_expired", 2, T0 + 500)  # fmt: skip
    assert fenced["decided_ms"] == T0 + 2_000
    # A record of the second batch naming a decision of the first: found in the table.
    assert rows[7]["trigger_kind"] == "session_expired" and rows[7]["decision_sequence"] == 41
    elected = rows[8]
    names = ("rule", "trigger_kind", "trigger_principal", "trigger_request_id")
    cause = [elected[c] for c in names]
    assert cause == ["preferred", "admin_request", "User:ops", "r-9"]
    # The decision record itself carries its own trigger; records with no cause have none.
    assert rows[6]["trigger_principal"] == "User:ops"
    assert rows[1]["decision_sequence"] is None and rows[1]["trigger_kind"] is None
    assert rows[9]["tombstone"] and rows[9]["record_type"] == RecordType.TOPIC.name


def test_a_replayed_batch_appends_nothing(warehouse: Warehouse) -> None:
    version = DeltaTable(warehouse.path(METADATA_HISTORY)).version()
    MetadataHistoryWriter(warehouse).apply(batches()[1], 1)
    assert DeltaTable(warehouse.path(METADATA_HISTORY)).version() == version
    assert metadata_history(warehouse.root).num_rows == 9


def test_metadata_as_of_an_instant(warehouse: Warehouse) -> None:
    before = by_offset(metadata_as_of(warehouse.root, T0 + 1_500))
    assert sorted(before) == [0, 1]  # the topic and its first partition record
    fenced = by_offset(metadata_as_of(warehouse.root, T0 + 2_000))
    assert sorted(fenced) == [0, 2, 3, 4]  # the partition's newer record replaces offset 1
    assert fenced[4]["partition_record"]["leader"] == 1 and fenced[3]["node_record"]["fenced"]
    after = by_offset(metadata_as_of(warehouse.root, T0 + 60_000))
    assert sorted(after) == [2, 6, 7, 8]  # the topic's tombstone removed it
    assert not after[7]["node_record"]["fenced"]
    assert metadata_as_of(warehouse.root, T0 - 1).num_rows == 0


def test_tables_by_version_and_by_instant(warehouse: Warehouse) -> None:
    first = read_table(warehouse.root, METADATA_HISTORY, version=1)  # 0 created it
    assert sorted(first.column("log_offset").to_pylist()) == [0, 1, 2, 3, 4]
    assert read_table(warehouse.root, METADATA_HISTORY).num_rows == 9
    now = read_table(warehouse.root, METADATA_HISTORY, as_of=datetime.now(UTC))
    assert now.num_rows == 9
    with pytest.raises(ValueError):
        read_table(warehouse.root, METADATA_HISTORY, version=1, as_of=T0)


def test_the_history_api_imports_no_spark() -> None:
    code = ("import sys, kafkacoord.spark.warehouse.history; "
            "sys.exit('pyspark' in sys.modules)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_cli_rebuilds_the_image_as_of_an_instant_from_the_warehouse(
    warehouse: Warehouse,
) -> None:
    from kafkacoord.cli.as_of import warehouse_image

    fenced = warehouse_image(warehouse.root, T0 + 2_000)
    state = fenced.partition("orders", 0)
    assert state is not None and state.leader == 1 and state.cause is not None
    assert state.cause.decision == FENCING and state.cause.rule == "clean"
    node = fenced.node(2)
    assert node is not None and node.fenced and node.decision == FENCING
    later = warehouse_image(warehouse.root, T0 + 60_000)
    assert later.topic("orders") is None  # its tombstone
    assert warehouse_image(warehouse.root, T0 - 1).topic("orders") is None
