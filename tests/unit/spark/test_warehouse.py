"""The Delta tables: upserts and deletes by key, replay protection, snapshots, optimize."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from kafkacoord.spark.warehouse import DELETED, KEY, AlreadyAppliedError, Warehouse
from kafkacoord.spark.warehouse.delta import MAX_FILES

SCHEMA = pa.schema([("name", pa.string()), ("value", pa.int64())])
SCHEMAS = {"t": SCHEMA}


def rows(*items: tuple[str, int | None]) -> pa.Table:
    """Upserts (value given) and deletes (value None) keyed by name."""
    return pa.table(
        {
            KEY: pa.array([n.encode() for n, _ in items], pa.binary()),
            DELETED: pa.array([v is None for _, v in items], pa.bool_()),
            "name": pa.array([n for n, _ in items], pa.string()),
            "value": pa.array([v for _, v in items], pa.int64()),
        }
    )


TS_SCHEMA = pa.schema([("name", pa.string()), ("at", pa.timestamp("ms", tz="UTC"))])


def state(wh: Warehouse, **kwargs: object) -> dict[str, int]:
    table = wh.read("t", SCHEMA, **kwargs)  # type: ignore[arg-type]
    return dict(
        zip(table.column("name").to_pylist(), table.column("value").to_pylist(), strict=True)
    )


def test_newest_row_wins_and_deletes_remove(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    assert state(wh) == {}
    wh.commit({"t": rows(("a", 1), ("b", 2))}, SCHEMAS, query="q", batch=0)
    wh.commit({"t": rows(("a", 10), ("c", 3))}, SCHEMAS, query="q", batch=1)
    wh.commit({"t": rows(("b", None), ("never", None))}, SCHEMAS, query="q", batch=2)
    assert state(wh) == {"a": 10, "c": 3}
    assert wh.manifest().batches == {"q": 2}
    # The table holds only its current rows: any Delta reader reads it as is.
    plain = DeltaTable(str(tmp_path / "tables" / "t")).to_pyarrow_dataset().to_table()
    assert sorted(plain.column("name").to_pylist()) == ["a", "c"]
    assert plain.schema.names == ["_key", "name", "value"]


def test_a_replayed_batch_writes_nothing(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS, query="q", batch=5)
    version = DeltaTable(str(tmp_path / "tables" / "t")).version()
    with pytest.raises(AlreadyAppliedError):
        wh.commit({"t": rows(("a", 99))}, SCHEMAS, query="q", batch=5)
    assert state(wh) == {"a": 1}
    assert DeltaTable(str(tmp_path / "tables" / "t")).version() == version


def test_a_crash_before_publish_hides_the_batch_and_its_replay_skips_written_tables(
    tmp_path: Path,
) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS, query="q", batch=0)

    def crash() -> None:
        raise RuntimeError("crash between the table commits and the snapshot")

    with pytest.raises(RuntimeError):
        wh.commit({"t": rows(("a", 2), ("b", 1))}, SCHEMAS, query="q", batch=1,
                  before_publish=crash)  # fmt: skip
    assert state(wh) == {"a": 1}  # the views still see batch 0
    assert wh.manifest().batches == {"q": 0}
    written = DeltaTable(str(tmp_path / "tables" / "t")).version()
    wh.commit({"t": rows(("a", 2), ("b", 1))}, SCHEMAS, query="q", batch=1)
    assert state(wh) == {"a": 2, "b": 1}
    # The replay found the batch's transaction in the table and merged nothing again.
    assert DeltaTable(str(tmp_path / "tables" / "t")).version() == written


def test_an_older_snapshot_reads_the_tables_as_they_were(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS, query="q", batch=0, settings={"window": 10})
    first = wh.manifest()
    wh.commit({"t": rows(("a", 2), ("b", 3))}, SCHEMAS, query="q", batch=1)
    assert state(wh, manifest=first) == {"a": 1}
    assert state(wh) == {"a": 2, "b": 3}
    assert wh.manifest().settings == {"window": 10}
    # By the snapshot table's own Delta version, too: version 0 published batch 0.
    assert wh.manifest(version=0).batches == {"q": 0}


def test_whole_table_replacement_and_timestamps(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS)
    wh.commit({}, SCHEMAS, replace={"t": rows(("z", 26))})
    assert state(wh) == {"z": 26}
    at = pa.array([1_700_000_000_123], pa.timestamp("ms", tz="UTC"))
    change = pa.table({"_key": [b"x"], "_deleted": [False], "name": ["x"], "at": at})
    wh.commit({"ts": change}, {"ts": TS_SCHEMA})
    read = wh.read("ts", TS_SCHEMA)
    assert read.schema == TS_SCHEMA and read.column("at").to_pylist() == at.to_pylist()


def test_optimize_merges_files_and_pandas_reads_the_table(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path, retain_hours=0)
    expected = {}
    for batch in range(MAX_FILES + 2):  # each insert-only merge adds a file
        wh.commit({"t": rows((f"k{batch}", batch))}, SCHEMAS, query="q", batch=batch)
        expected[f"k{batch}"] = batch
    path = tmp_path / "tables" / "t"
    assert len(DeltaTable(str(path)).file_uris()) > MAX_FILES
    assert wh.compact("t", SCHEMA)
    assert len(DeltaTable(str(path)).file_uris()) == 1
    assert not wh.compact("t", SCHEMA)
    # Vacuum left only the optimized file.
    assert len(list(path.glob("*.parquet"))) == 1
    wh.commit({}, SCHEMAS, query="q", batch=99)  # the snapshot now names the optimized version
    assert state(wh) == expected
    frame = DeltaTable(str(path)).to_pandas(columns=["name", "value"])
    assert dict(zip(frame["name"], frame["value"], strict=True)) == expected


def test_a_read_of_some_columns_reads_only_those(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1), ("b", 2))}, SCHEMAS)
    values = wh.read("t", SCHEMA, columns=["value"])
    assert values.schema == pa.schema([("value", pa.int64())])
    assert sorted(values.column("value").to_pylist()) == [1, 2]
    assert wh.read("never", SCHEMA, columns=["name"]).schema.names == ["name"]


def test_writers_of_different_tables_commit_side_by_side_and_lose_nothing(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    schemas = {"a": SCHEMA, "b": SCHEMA}
    errors: list[BaseException] = []

    def write(table: str, query: str) -> None:
        try:
            for batch in range(8):
                wh.commit({table: rows((f"k{batch}", batch))}, schemas, query=query, batch=batch)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t, f"q{t}")) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    manifest = wh.manifest()
    assert manifest.batches == {"qa": 7, "qb": 7}
    # The snapshot names each table's newest version: no publish undid another's.
    for table in ("a", "b"):
        assert manifest.versions[table] == DeltaTable(str(tmp_path / "tables" / table)).version()
        assert len(wh.read(table, SCHEMA)) == 8


def test_a_scoped_merge_updates_and_deletes_the_keys_of_its_scope(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    schema = pa.schema([("bucket", pa.int64()), ("value", pa.int64())])

    def change(*items: tuple[int, int, int | None]) -> pa.Table:
        """(key number, bucket, value; None deletes): the key embeds its bucket."""
        return pa.table({
            KEY: pa.array([f"{k}:{b}".encode() for k, b, _ in items], pa.binary()),
            DELETED: pa.array([v is None for _, _, v in items], pa.bool_()),
            "bucket": pa.array([b for _, b, _ in items], pa.int64()),
            "value": pa.array([v for _, _, v in items], pa.int64()),
        })  # fmt: skip

    for bucket in range(4):  # a file per bucket
        wh.commit({"s": change(*((k, bucket, bucket) for k in range(3)))}, {"s": schema},
                  scope={"s": "bucket"})  # fmt: skip
    # The newest bucket's rows updated, one of the oldest deleted, a new one inserted.
    wh.commit({"s": change((0, 3, 30), (1, 0, None), (9, 3, 90))}, {"s": schema},
              scope={"s": "bucket"})  # fmt: skip
    read = wh.read("s", schema)
    got = sorted(zip(read.column("bucket").to_pylist(), read.column("value").to_pylist(),
                     strict=True))  # fmt: skip
    assert got == sorted([(0, 0), (0, 0), (1, 1), (1, 1), (1, 1), (2, 2), (2, 2), (2, 2),
                          (3, 30), (3, 3), (3, 3), (3, 90)])  # fmt: skip


def test_a_table_written_before_a_schema_gained_a_field_takes_the_new_column(
    tmp_path: Path,
) -> None:
    """A record type's newer Avro version adds an optional field (a group's cause, say):
    the warehouse's existing table gains the column, its old rows read it as null."""
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1), ("b", 2))}, SCHEMAS, query="q", batch=0)
    cause = pa.struct([("kind", pa.string()), ("detail", pa.string())])
    newer = pa.schema([*SCHEMA, pa.field("cause", cause)])
    change = rows(("b", 20), ("c", 3)).append_column(
        "cause", pa.array([{"kind": "joined", "detail": "m"}, None], cause)
    )
    wh.commit({"t": change}, {"t": newer}, query="q", batch=1)
    table = wh.read("t", newer)
    got = dict(
        zip(table.column("name").to_pylist(), table.column("cause").to_pylist(), strict=True)
    )
    assert got == {"a": None, "b": {"kind": "joined", "detail": "m"}, "c": None}
    assert state(wh) == {"a": 1, "b": 20, "c": 3}
    # Appends (history tables) take new columns the same way.
    wh.commit({}, {"h": newer}, query="q", batch=2, append={"h": change})
    wh.commit({}, {"h": pa.schema([*newer, pa.field("more", pa.int64())])}, query="q", batch=3,
              append={"h": change.append_column("more", pa.array([7, 8], pa.int64()))})  # fmt: skip
    history = DeltaTable(str(tmp_path / "tables" / "h")).to_pyarrow_table()
    assert sorted(history.column("more").to_pylist(), key=str) == [7, 8, None, None]
