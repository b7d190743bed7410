"""The warehouse manifest: which Parquet files make up each table, at one version.

Every change (a micro-batch, a compaction) writes the next version as a new
file under ``_log/``; the highest version is the current state. A version is
published by an atomic rename, so readers see all of a batch or none of it,
across every table at once.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
    # The Delta warehouse: each table's Delta version as of this batch.
    versions: dict[str, int] = field(default_factory=dict)

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
            versions={t: int(v) for t, v in data.get("versions", {}).items()},
        )


def versions(root: Path) -> list[int]:
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
    found = versions(root)
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
    found = versions(root)
    for version in found[:-keep] if keep > 0 else found:
        (root / LOG_DIR / f"{version:0{_WIDTH}d}.json").unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
