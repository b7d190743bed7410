"""The hand-made Parquet warehouse the views ran on before Delta Lake: the bench's baseline.

``bench/views.py`` runs the view job on it and on the Delta warehouse in one run
to compare freshness, batch cost and size on disk. Same interface as
``kafkacoord.spark.warehouse.Warehouse`` (``manifest``, ``read``, ``commit``,
``compact``, ``remove_orphans``), so the job, the sampler and the views run on it unchanged.

Every row carries three hidden columns: ``_key`` (the primary key, bytes),
``_seq`` (the manifest version that wrote it) and ``_deleted`` (a tombstone).
A micro-batch appends one file per changed table holding only the changed
keys, so its cost follows the change, not the table size. The current state
of a key is its row in the newest file that has it, unless that row is a
tombstone. Compaction merges runs of files (a binary-counter schedule: every
row is rewritten O(log n) times) and drops tombstones once they reach the
oldest file. Which files make up each table is a manifest, one JSON file per
version under ``_log/``, published by an atomic rename.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kafkacoord.spark.warehouse.rows import DELETED, KEY, AlreadyAppliedError, conform

LOG_DIR = "_log"
_WIDTH = 20


@dataclass(frozen=True, slots=True)
class DataFile:
    """One immutable Parquet file of a table; rows carry ``_seq`` in ``[seq_min, seq_max]``."""

    path: str  # relative to the warehouse root
    rows: int
    seq_min: int
    seq_max: int


@dataclass(slots=True)
class Manifest:
    version: int = 0
    written_ms: int = 0
    # Files of each table, oldest first: a newer file's rows win over an older one's.
    tables: dict[str, list[DataFile]] = field(default_factory=dict)
    # Last micro-batch applied per streaming query: a replayed batch is skipped.
    batches: dict[str, int] = field(default_factory=dict)
    # Files dropped by a compaction, with the version that dropped them (deleted later).
    retired: list[tuple[int, str]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def files(self, table: str) -> list[DataFile]:
        return list(self.tables.get(table, []))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(
            version=int(data["version"]),
            written_ms=int(data["written_ms"]),
            tables={t: [DataFile(**f) for f in fs] for t, fs in data["tables"].items()},
            batches={q: int(b) for q, b in data["batches"].items()},
            retired=[(int(v), str(p)) for v, p in data.get("retired", [])],
            settings=dict(data.get("settings", {})),
        )


def log_versions(root: Path) -> list[int]:
    log = root / LOG_DIR
    if not log.is_dir():
        return []
    found = []
    for entry in log.iterdir():
        if entry.suffix == ".json" and entry.stem.isdigit():
            found.append(int(entry.stem))
    return sorted(found)


def load(root: Path, version: int) -> Manifest:
    return Manifest.from_json((root / LOG_DIR / f"{version:0{_WIDTH}d}.json").read_text("utf-8"))


def latest(root: Path) -> Manifest:
    """The current manifest; an empty one before the first batch."""
    found = log_versions(root)
    for version in reversed(found):
        try:
            return load(root, version)
        except FileNotFoundError:  # pruned by the writer meanwhile: try the one before
            continue
    return Manifest()


def publish(root: Path, manifest: Manifest) -> None:
    """Write ``manifest`` as its version, durably, then make it visible in one rename."""
    log = root / LOG_DIR
    log.mkdir(parents=True, exist_ok=True)
    final = log / f"{manifest.version:0{_WIDTH}d}.json"
    if final.exists():
        raise FileExistsError(f"manifest version {manifest.version} exists: two writers?")
    tmp = log / f".tmp-{uuid.uuid4().hex}"
    with tmp.open("w", encoding="utf-8") as out:
        out.write(manifest.to_json())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, final)
    _fsync_dir(log)


def prune(root: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` manifest versions."""
    found = log_versions(root)
    for version in found[:-keep] if keep > 0 else found:
        (root / LOG_DIR / f"{version:0{_WIDTH}d}.json").unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SEQ: Final = "_seq"
TABLES_DIR: Final = "tables"
MAX_FILES: Final = 16


def with_hidden(schema: pa.Schema) -> pa.Schema:
    return pa.schema(
        [pa.field(KEY, pa.binary()), pa.field(SEQ, pa.int64()), pa.field(DELETED, pa.bool_()),
         *schema]
    )  # fmt: skip


def latest_rows(tables: Sequence[pa.Table]) -> pa.Table:
    """Merge on read: ``tables`` oldest first; each key's newest row (tombstones kept)."""
    parts: list[pa.Table] = []
    seen: pa.Array | None = None
    for newer in reversed(tables):
        fresh = newer
        if seen is not None and len(seen):
            fresh = newer.filter(pc.invert(pc.is_in(newer.column(KEY), value_set=seen)))
        parts.append(fresh)
        keys = fresh.column(KEY).combine_chunks()
        seen = keys if seen is None else pa.concat_arrays([seen, keys])
    if not parts:
        raise ValueError("no tables to merge")
    return pa.concat_tables(list(reversed(parts)), promote_options="default")


class ParquetWarehouse:
    """One warehouse directory: tables, manifests and (beside them) Spark checkpoints.

    One process writes (the view job: its batches and its compactor thread share
    a lock); any number of processes read.
    """

    def __init__(self, root: Path | str, *, keep_versions: int = 20) -> None:
        self.root = Path(root)
        self.keep_versions = keep_versions
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------

    def manifest(self) -> Manifest:
        return latest(self.root)

    def read(
        self,
        table: str,
        schema: pa.Schema,
        manifest: Manifest | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The current rows of ``table`` (tombstones and hidden columns removed)."""
        for attempt in range(3):
            current = manifest or self.manifest()
            try:
                merged = self._merged(current.files(table), schema)
                break
            except FileNotFoundError:
                if manifest is not None or attempt == 2:
                    raise  # a pinned snapshot whose files were compacted away
        live = merged.filter(pc.invert(merged.column(DELETED)))
        return live.select(list(columns) if columns is not None else schema.names)

    def _merged(self, files: Sequence[DataFile], schema: pa.Schema) -> pa.Table:
        full = with_hidden(schema)
        if not files:
            return full.empty_table()
        return latest_rows([conform(pq.read_table(self.root / f.path), full) for f in files])

    # -- writing -----------------------------------------------------------------

    def commit(
        self,
        changes: Mapping[str, pa.Table],
        schemas: Mapping[str, pa.Schema],
        *,
        query: str | None = None,
        batch: int | None = None,
        replace: Mapping[str, pa.Table] | None = None,
        settings: Mapping[str, object] | None = None,
        before_publish: Callable[[], None] | None = None,
        scope: Mapping[str, str] | None = None,  # Delta's merge scoping: nothing to scope here
    ) -> Manifest:
        """Append ``changes`` (rows with ``_key`` and ``_deleted``) as one new version.

        ``replace`` swaps whole (small) tables. With ``query`` and ``batch`` the
        version records the batch, and a batch already recorded raises
        :class:`AlreadyAppliedError` with nothing written.
        """
        with self._lock:
            current = self.manifest()
            if query is not None and batch is not None and current.batches.get(query, -1) >= batch:
                raise AlreadyAppliedError(f"{query} batch {batch}")
            version = current.version + 1
            tables = {t: list(fs) for t, fs in current.tables.items()}
            for name, rows in (changes or {}).items():
                if rows.num_rows:
                    tables.setdefault(name, []).append(
                        self._write(name, rows, schemas[name], version)
                    )
            for name, rows in (replace or {}).items():
                tables[name] = (
                    [self._write(name, rows, schemas[name], version)] if rows.num_rows else []
                )
                current.retired.extend((version, f.path) for f in current.files(name))
            batches = dict(current.batches)
            if query is not None and batch is not None:
                batches[query] = batch
            next_manifest = Manifest(
                version=version,
                written_ms=int(time.time() * 1000),
                tables=tables,
                batches=batches,
                retired=current.retired,
                settings={**current.settings, **(settings or {})},
            )
            if before_publish is not None:
                before_publish()
            self._publish(next_manifest)
            return next_manifest

    def _write(self, table: str, rows: pa.Table, schema: pa.Schema, version: int) -> DataFile:
        full = with_hidden(schema)
        rows = rows.append_column(SEQ, pa.array([version] * rows.num_rows, pa.int64()))
        data = conform(rows, full)
        seqs = data.column(SEQ)
        return self._write_file(table, data, int(pc.min(seqs).as_py()), int(pc.max(seqs).as_py()))

    def _write_file(self, table: str, data: pa.Table, seq_min: int, seq_max: int) -> DataFile:
        relative = f"{TABLES_DIR}/{table}/{seq_max:012d}-{uuid.uuid4().hex[:12]}.parquet"
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            pq.write_table(data, out, compression="zstd", compression_level=1)
            out.flush()
            os.fsync(out.fileno())
        return DataFile(relative, data.num_rows, seq_min, seq_max)

    def _publish(self, manifest: Manifest) -> None:
        expired = [p for v, p in manifest.retired if v <= manifest.version - self.keep_versions]
        manifest.retired = [
            (v, p) for v, p in manifest.retired if v > manifest.version - self.keep_versions
        ]
        publish(self.root, manifest)
        for path in expired:
            (self.root / path).unlink(missing_ok=True)
        prune(self.root, self.keep_versions)

    # -- compaction --------------------------------------------------------------

    def compact(self, table: str, schema: pa.Schema, *, full: bool = False) -> bool:
        """Merge one run of ``table``'s files if the schedule says so; True if it did."""
        files = self.manifest().files(table)
        run = list(range(len(files))) if full and len(files) > 1 else compaction_run(files)
        if not run:
            return False
        chosen = [files[i] for i in run]
        full_schema = with_hidden(schema)
        merged = latest_rows(
            [conform(pq.read_table(self.root / f.path), full_schema) for f in chosen]
        )
        if run[0] == 0:
            merged = merged.filter(pc.invert(merged.column(DELETED)))  # nothing older to shadow
        merged = merged.sort_by(KEY)
        new = self._write_file(
            table, merged, min(f.seq_min for f in chosen), max(f.seq_max for f in chosen)
        )
        with self._lock:
            current = self.manifest()
            names = [f.path for f in current.files(table)]
            start = names.index(chosen[0].path)
            if names[start : start + len(chosen)] != [f.path for f in chosen]:
                (self.root / new.path).unlink(missing_ok=True)
                return False  # only this compactor removes files: should not happen
            files = current.files(table)
            files[start : start + len(chosen)] = [new]
            tables = dict(current.tables)
            tables[table] = files
            version = current.version + 1
            self._publish(
                Manifest(
                    version=version,
                    written_ms=int(time.time() * 1000),
                    tables=tables,
                    batches=dict(current.batches),
                    retired=[*current.retired, *((version, f.path) for f in chosen)],
                    settings=dict(current.settings),
                )
            )
        return True

    def remove_orphans(self) -> int:
        """Delete data files no manifest knows (left by a crash between write and publish)."""
        known: set[str] = set()
        for version in log_versions(self.root):
            try:
                m = load(self.root, version)
            except FileNotFoundError:
                continue
            known.update(f.path for fs in m.tables.values() for f in fs)
            known.update(p for _, p in m.retired)
        removed = 0
        tables_dir = self.root / TABLES_DIR
        if tables_dir.is_dir():
            for path in tables_dir.glob("*/*.parquet"):
                if str(path.relative_to(self.root)) not in known:
                    path.unlink(missing_ok=True)
                    removed += 1
        return removed


def compaction_run(files: Sequence[DataFile]) -> list[int]:
    """Indexes of the newest files to merge now, or none.

    A binary counter: walking back from the newest file, an older file joins
    the run while it is no bigger than the run so far. Equal-sized deltas pair
    up, pairs pair up, and so on, so files stay few (about log n) and each row
    is rewritten about log n times. Past ``MAX_FILES`` the newest files merge
    anyway, which bounds the work of a read.
    """
    if len(files) < 2:
        return []
    start = len(files) - 1
    total = files[start].rows
    while start > 0 and files[start - 1].rows <= total:
        start -= 1
        total += files[start].rows
    if start < len(files) - 1:
        return list(range(start, len(files)))
    if len(files) > MAX_FILES:
        return list(range(len(files) - MAX_FILES // 2, len(files)))
    return []
