"""The warehouse store: append, merge on read, replay protection, compaction, crash leftovers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafkacoord.spark.warehouse import AlreadyAppliedError, DataFile, Warehouse
from kafkacoord.spark.warehouse.store import DELETED, KEY, compaction_run

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


def state(wh: Warehouse) -> dict[str, int]:
    table = wh.read("t", SCHEMA)
    return dict(
        zip(table.column("name").to_pylist(), table.column("value").to_pylist(), strict=True)
    )


def test_newest_row_wins_and_deletes_remove(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    assert state(wh) == {}
    wh.commit({"t": rows(("a", 1), ("b", 2))}, SCHEMAS, query="q", batch=0)
    wh.commit({"t": rows(("a", 10), ("c", 3))}, SCHEMAS, query="q", batch=1)
    wh.commit({"t": rows(("b", None))}, SCHEMAS, query="q", batch=2)
    assert state(wh) == {"a": 10, "c": 3}
    manifest = wh.manifest()
    assert manifest.batches == {"q": 2}
    assert [f.rows for f in manifest.files("t")] == [2, 2, 1]


def test_a_replayed_batch_writes_nothing(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS, query="q", batch=5)
    with pytest.raises(AlreadyAppliedError):
        wh.commit({"t": rows(("a", 99))}, SCHEMAS, query="q", batch=5)
    assert state(wh) == {"a": 1}
    assert len(list((tmp_path / "tables" / "t").iterdir())) == 1


def test_crash_before_publish_leaves_no_visible_change_and_orphans_are_removed(
    tmp_path: Path,
) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS, query="q", batch=0)

    def crash() -> None:
        raise RuntimeError("crash between the data files and the manifest")

    with pytest.raises(RuntimeError):
        wh.commit({"t": rows(("a", 2))}, SCHEMAS, query="q", batch=1, before_publish=crash)
    assert state(wh) == {"a": 1}
    assert wh.manifest().batches == {"q": 0}
    assert wh.remove_orphans() == 1
    wh.commit({"t": rows(("a", 2))}, SCHEMAS, query="q", batch=1)
    assert state(wh) == {"a": 2}


def test_compaction_keeps_the_state_and_drops_tombstones_at_the_base(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path, keep_versions=2)
    expected: dict[str, int] = {}
    for batch in range(40):
        change = [(f"k{(batch * 7 + i) % 50}", batch * 100 + i) for i in range(5)]
        if batch % 3 == 0:
            change.append((f"k{batch % 50}", None))
        deduped = dict(change)
        wh.commit({"t": rows(*deduped.items())}, SCHEMAS, query="q", batch=batch)
        for name, value in deduped.items():
            if value is None:
                expected.pop(name, None)
            else:
                expected[name] = value
        while wh.compact("t", SCHEMA):
            pass
        assert state(wh) == expected
    files = wh.manifest().files("t")
    assert len(files) <= 6  # about log2(40)
    assert wh.compact("t", SCHEMA, full=True)
    only = wh.manifest().files("t")
    assert len(only) == 1 and only[0].rows == len(expected)  # no tombstones left
    assert state(wh) == expected
    # Old files are deleted once no kept manifest needs them.
    for _ in range(3):
        wh.commit({}, SCHEMAS)
    assert len(list((tmp_path / "tables" / "t").iterdir())) == 1


def test_compaction_schedule_is_a_binary_counter() -> None:
    def files(*sizes: int) -> list[DataFile]:
        return [DataFile(f"f{i}", s, i, i) for i, s in enumerate(sizes)]

    assert compaction_run(files(100)) == []
    assert compaction_run(files(100, 1)) == []
    assert compaction_run(files(2, 1, 1)) == [0, 1, 2]
    assert compaction_run(files(4, 2, 1, 1)) == [0, 1, 2, 3]
    assert compaction_run(files(1000, 2, 1, 1)) == [1, 2, 3]
    many = files(*([10_000 - i for i in range(20)]))
    assert compaction_run(many) == list(range(12, 20))


def test_whole_table_replacement(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.commit({"t": rows(("a", 1))}, SCHEMAS)
    wh.commit({}, SCHEMAS, replace={"t": rows(("z", 26))})
    assert state(wh) == {"z": 26}
