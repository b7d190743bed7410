"""The warehouse on Delta Lake: one Delta table per view table, written by the driver.

A micro-batch merges its changes into each changed table with delta-rs (rows
upserted by ``_key``, tombstones deleted), so every table holds exactly its
current rows and any Delta reader (Spark, DuckDB, polars, pandas) reads it
as is. Each table commit carries the batch as a Delta application transaction:
a batch replayed after a crash skips the tables it already wrote.

Delta commits one table at a time; a batch becomes visible to the views when
``_snapshot`` (a one-row Delta table, overwritten per batch) names the table
versions it wrote, so views read all of a batch or none of it, across tables.
Compaction is Delta's ``optimize``; unreferenced files go with ``vacuum``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import structlog
from deltalake import DeltaTable, Schema, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import CommitProperties

from .rows import DELETED, KEY, AlreadyAppliedError, conform

log = structlog.get_logger(__name__)

TABLES_DIR: Final = "tables"
SNAPSHOT: Final = "_snapshot"
SNAPSHOT_VACUUM_EVERY: Final = 100
# Optimize a table once a batch has left it with this many files.
MAX_FILES: Final = 16
_SNAPSHOT_SCHEMA: Final = pa.schema([("version", pa.int64()), ("manifest", pa.string())])


@dataclass(slots=True)
class Manifest:
    """One published batch: the row of ``_snapshot``."""

    version: int = 0
    written_ms: int = 0
    # Last micro-batch applied per streaming query: a replayed batch is skipped.
    batches: dict[str, int] = field(default_factory=dict)
    # What views are evaluated with (the job's settings).
    settings: dict[str, Any] = field(default_factory=dict)
    # Each table's Delta version as of this batch.
    versions: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(
            version=int(data["version"]),
            written_ms=int(data["written_ms"]),
            batches={q: int(b) for q, b in data["batches"].items()},
            settings=dict(data.get("settings", {})),
            versions={t: int(v) for t, v in data.get("versions", {}).items()},
        )


def delta_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with ``_key`` first, timestamps in microseconds (Delta's unit)."""
    fields = [pa.field(KEY, pa.binary())]
    for f in schema:
        if pa.types.is_timestamp(f.type):
            fields.append(f.with_type(pa.timestamp("us", tz=f.type.tz)))
        else:
            fields.append(f)
    return pa.schema(fields)


def _quoted(name: str) -> str:
    return f'"{name}"'  # columns such as "group" and "offset" are SQL keywords


class Warehouse:
    """The views' warehouse directory; one process writes, any number read."""

    def __init__(self, root: Path | str, *, retain_hours: float = 1.0) -> None:
        self.root = Path(root)
        # Time travel by Delta version reaches back this far (older files are vacuumed).
        self.retain_hours = retain_hours
        # The snapshot: read, bumped and published under it, briefly.
        self._lock = threading.Lock()
        # One per table, held from a table's write until the snapshot naming it is out:
        # writers of other tables (the lag sampler, the metadata history, maintenance)
        # never wait for a batch's merge, and a table's versions publish in order.
        self._table_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # (table, columns) pairs already checked: the check runs once per schema, not per batch.
        self._conformed: set[tuple[str, tuple[str, ...]]] = set()

    @contextmanager
    def _holding(self, tables: Iterable[str]) -> Iterator[None]:
        with self._locks_guard:
            locks = [self._table_locks.setdefault(t, threading.Lock()) for t in sorted(set(tables))]
        with ExitStack() as stack:
            for lock in locks:  # in name order: no two writers wait on each other
                stack.enter_context(lock)
            yield

    def path(self, table: str) -> str:
        """Where ``table``'s Delta table lives (for any Delta reader)."""
        return str(self.root / TABLES_DIR / table)

    # -- reading -----------------------------------------------------------------

    def manifest(self, version: int | None = None) -> Manifest:
        """The newest published batch (or the one published as Delta ``version`` of
        ``_snapshot``); an empty manifest before the first batch."""
        try:
            snapshot = DeltaTable(str(self.root / SNAPSHOT), version=version)
        except TableNotFoundError:
            return Manifest()
        rows = snapshot.to_pyarrow_dataset().to_table()
        if rows.num_rows == 0:
            return Manifest()
        return Manifest.from_json(str(rows.column("manifest")[0].as_py()))

    def read(
        self,
        table: str,
        schema: pa.Schema,
        manifest: Manifest | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The rows of ``table`` as of ``manifest`` (default: the newest); only ``columns``
        if given (Parquet reads only those: a view needing a few skips heavy ones)."""
        wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        current = manifest or self.manifest()
        version = current.versions.get(table)
        if version is None:
            return wanted.empty_table()
        dataset = DeltaTable(self.path(table), version=version).to_pyarrow_dataset()
        stored = set(dataset.schema.names)
        data = dataset.to_table(columns=[c for c in wanted.names if c in stored])
        return conform(data, wanted)

    # -- writing -----------------------------------------------------------------

    def commit(
        self,
        changes: Mapping[str, pa.Table],
        schemas: Mapping[str, pa.Schema],
        *,
        query: str | None = None,
        batch: int | None = None,
        replace: Mapping[str, pa.Table] | None = None,
        append: Mapping[str, pa.Table] | None = None,
        settings: Mapping[str, object] | None = None,
        before_publish: Callable[[], None] | None = None,
        scope: Mapping[str, str] | None = None,
    ) -> Manifest:
        """Merge ``changes`` (rows with ``_key`` and ``_deleted``), overwrite ``replace``,
        append ``append`` (history: rows never change), then publish the batch; a batch
        already published raises :class:`~.rows.AlreadyAppliedError` with nothing written.

        ``scope`` names, per table, an integer column the key embeds (``lag_samples``'
        bucket): the merge then reads only target files holding values at or above the
        change's lowest, not the whole table."""
        written = [n for n, r in {**(changes or {}), **(append or {})}.items() if r.num_rows]
        with self._holding([*written, *(replace or {})]):
            current = self.manifest()
            if query is not None and batch is not None and current.batches.get(query, -1) >= batch:
                raise AlreadyAppliedError(f"{query} batch {batch}")
            txn = (
                CommitProperties(app_transactions=[Transaction(query, batch)])
                if query is not None and batch is not None
                else None
            )
            versions: dict[str, int] = {}
            for name, rows in (changes or {}).items():
                if rows.num_rows:
                    versions[name] = self._merge(
                        name,
                        rows,
                        schemas[name],
                        query=query,
                        batch=batch,
                        txn=txn,
                        scope=(scope or {}).get(name),
                    )
            for name, rows in (append or {}).items():
                if rows.num_rows:
                    versions[name] = self._append(name, rows, schemas[name], batch=batch,
                                                  query=query, txn=txn)  # fmt: skip
            for name, rows in (replace or {}).items():
                data = conform(rows, delta_schema(schemas[name]))
                write_deltalake(self.path(name), data, mode="overwrite", schema_mode="overwrite")
                versions[name] = DeltaTable(self.path(name)).version()
            with self._lock:
                current = self.manifest()  # others may have published meanwhile
                batches = dict(current.batches)
                if query is not None and batch is not None:
                    batches[query] = batch
                published = Manifest(
                    version=current.version + 1,
                    written_ms=int(time.time() * 1000),
                    batches=batches,
                    settings={**current.settings, **(settings or {})},
                    versions={**current.versions, **versions},
                )
                if before_publish is not None:
                    before_publish()
                self._publish(published)
                return published

    def _publish(self, manifest: Manifest) -> None:
        row = pa.table({"version": [manifest.version], "manifest": [manifest.to_json()]},
                       schema=_SNAPSHOT_SCHEMA)  # fmt: skip
        write_deltalake(str(self.root / SNAPSHOT), row, mode="overwrite")
        if manifest.version % SNAPSHOT_VACUUM_EVERY == 0:
            self.vacuum(SNAPSHOT)

    def _table(self, name: str, schema: pa.Schema) -> DeltaTable:
        wanted = delta_schema(schema)
        try:
            table = DeltaTable(self.path(name))
        except TableNotFoundError:
            return DeltaTable.create(self.path(name), schema=wanted)
        checked = (name, tuple(wanted.names))
        if checked in self._conformed:
            return table
        # A record type's newer Avro version adds optional fields: a merge would drop
        # their values without a word, so the table takes the columns first (old rows
        # read them as null).
        stored = set(table.schema().to_arrow().names)
        missing = [f for f in wanted if f.name not in stored]
        if missing:
            table.alter.add_columns(list(Schema.from_arrow(pa.schema(missing)).fields))
            log.info("warehouse table gained columns", table=name,
                     columns=[f.name for f in missing])  # fmt: skip
        self._conformed.add(checked)
        return table

    def _merge(
        self,
        name: str,
        rows: pa.Table,
        schema: pa.Schema,
        *,
        query: str | None,
        batch: int | None,
        txn: CommitProperties | None,
        scope: str | None = None,
    ) -> int:
        table = self._table(name, schema)
        if _written(table, query, batch):
            return table.version()  # written before a crash, not yet published
        predicate = f"t.{_quoted(KEY)} = s.{_quoted(KEY)}"
        lowest = None if scope is None else pc.min(rows.column(scope)).as_py()
        if lowest is not None:
            # Equal keys have equal scope values: files entirely below the lowest hold none.
            predicate += f" AND t.{_quoted(scope or '')} >= {int(lowest)}"
        columns = delta_schema(schema)
        source = conform(rows, pa.schema([*columns, pa.field(DELETED, pa.bool_())]))
        values = {_quoted(c): f"s.{_quoted(c)}" for c in columns.names}
        deleted = f"s.{_quoted(DELETED)}"
        (
            table.merge(
                source,
                predicate=predicate,
                source_alias="s",
                target_alias="t",
                commit_properties=txn,
            )
            .when_matched_delete(predicate=deleted)
            .when_matched_update(updates=values, predicate=f"NOT {deleted}")
            .when_not_matched_insert(updates=values, predicate=f"NOT {deleted}")
            .execute()
        )
        return table.version()

    def _append(
        self,
        name: str,
        rows: pa.Table,
        schema: pa.Schema,
        *,
        query: str | None,
        batch: int | None,
        txn: CommitProperties | None,
    ) -> int:
        table = self._table(name, schema)
        if _written(table, query, batch):
            return table.version()  # written before a crash, not yet published
        write_deltalake(table, conform(rows, delta_schema(schema)), mode="append",
                        commit_properties=txn)  # fmt: skip
        table.update_incremental()
        return table.version()

    # -- maintenance -------------------------------------------------------------

    def compact(self, table: str, schema: pa.Schema, *, full: bool = False) -> bool:
        """Delta's optimize (then vacuum) when the table has many files; True if it ran."""
        try:
            delta = DeltaTable(self.path(table))
        except TableNotFoundError:
            return False
        if len(delta.file_uris()) <= (1 if full else MAX_FILES):
            return False
        with self._holding([table]):  # optimize and a batch's merge would conflict
            delta = DeltaTable(self.path(table))
            delta.optimize.compact()
            # Views read the optimized version from now on, so vacuum may drop the old files.
            with self._lock:
                current = self.manifest()
                current.versions[table] = delta.version()
                current.version += 1
                current.written_ms = int(time.time() * 1000)
                self._publish(current)
        self.vacuum(table)
        return True

    def vacuum(self, table: str) -> int:
        """Delete files no version within ``retain_hours`` needs; returns how many."""
        path = self.root / SNAPSHOT if table == SNAPSHOT else Path(self.path(table))
        try:
            delta = DeltaTable(str(path))
        except TableNotFoundError:
            return 0
        removed = delta.vacuum(
            retention_hours=int(self.retain_hours),
            enforce_retention_duration=False,
            dry_run=False,
        )
        return len(removed)

    def remove_orphans(self) -> int:
        """Nothing to remove: a crash leaves no visible half-batch (unpublished table
        commits are replayed and skipped by their transaction ids; stray files go with
        ``vacuum``). Kept so the job treats every warehouse alike (the bench's baseline)."""
        return 0


def _written(table: DeltaTable, query: str | None, batch: int | None) -> bool:
    """The query's batch is already in the table (its Delta transaction id says so)."""
    if query is None or batch is None:
        return False
    done = table.transaction_version(query)
    return done is not None and done >= batch
