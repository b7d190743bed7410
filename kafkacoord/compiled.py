"""Which build of the listener's hot path runs: the mypyc-compiled modules or their sources.

`setup.py` compiles `MODULES` with mypyc into extension modules beside their sources, in
one group whose shared library is `kafkacoord._compiled__mypyc`, and writes `MANIFEST`:
the SHA-256 of each source it compiled. Python prefers an extension module to a source
of the same name, so an edited source would be shadowed by a stale extension. This
module is imported first (by `kafkacoord/__init__.py`) and sends every module of the
group to its source when the build is stale or `KAFKACOORD_PURE=1`: all of them or
none, because compiled modules call each other's compiled code directly.

It imports nothing of kafkacoord and is never compiled itself.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from types import ModuleType

# The listener's commit path: its connections, frames, dispatch, the runtime's turn, the
# group shard's offsets and replies, the record codecs, the batch producer and the
# cache. A module here must compile with mypyc and must not be subclassed by
# interpreted code.
MODULES: tuple[str, ...] = (
    "kafkacoord.wire.frames",
    "kafkacoord.server.services.dispatch",
    "kafkacoord.server.ops.observer",
    "kafkacoord.coordinator.runtime.appends",
    "kafkacoord.coordinator.runtime.clock",
    "kafkacoord.coordinator.runtime.guards",
    "kafkacoord.coordinator.runtime.host",
    "kafkacoord.coordinator.runtime.processor",
    "kafkacoord.coordinator.runtime.reply_cache",
    "kafkacoord.coordinator.runtime.shard",
    "kafkacoord.coordinator.runtime.timers",
    "kafkacoord.coordinator.runtime.turn",
    "kafkacoord.coordinator.groups.commit_replies",
    "kafkacoord.coordinator.groups.offset_manager",
    "kafkacoord.coordinator.groups.offsets",
    "kafkacoord.coordinator.groups.partitioning",
    "kafkacoord.coordinator.groups.records",
    "kafkacoord.coordinator.groups.scheduling",
    "kafkacoord.coordinator.groups.shard",
    "kafkacoord.codecs.avro_binary",
    "kafkacoord.codecs.batch_size",
    "kafkacoord.codecs.offset_commit_codec",
    "kafkacoord.codecs.records",
    "kafkacoord.storage.cache",
    "kafkacoord.storage.fold",
    "kafkacoord.storage.produce_wire",
    "kafkacoord.storage.batch_producer",
    "kafkacoord.coordinator.runtime.epoch_writer",
    "kafkacoord.coordinator.groups.undo",
    "kafkacoord.wire.server",
    "kafkacoord.coordinator.protocol.binary",
    "kafkacoord.coordinator.protocol.binary_codec",
    "kafkacoord.coordinator.protocol.binary_commit",
    "kafkacoord.coordinator.protocol.binary_consumer",
    "kafkacoord.coordinator.protocol.binary_fetch",
)
GROUP = "kafkacoord._compiled"
MANIFEST = "_compiled.json"
PURE_ENV = "KAFKACOORD_PURE"

PACKAGE_DIR = Path(__file__).resolve().parent


class Build(Enum):
    COMPILED = "compiled"  # every module of the group runs compiled
    PURE = "pure"  # no compiled build is present
    DISABLED = "disabled"  # a build is present; KAFKACOORD_PURE=1 runs the sources
    STALE = "stale"  # a build is present, but a source changed since it was compiled


class StaleBuildWarning(RuntimeWarning):
    """The compiled modules are older than their sources, which run instead."""


def source_path(module: str, package_dir: Path = PACKAGE_DIR) -> Path:
    return package_dir.joinpath(*module.split(".")[1:]).with_suffix(".py")


def extension_paths(module: str, package_dir: Path = PACKAGE_DIR) -> list[Path]:
    base = source_path(module, package_dir).with_suffix("")
    return [
        base.with_name(base.name + suffix)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        if base.with_name(base.name + suffix).exists()
    ]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_for(modules: Sequence[str], package_dir: Path = PACKAGE_DIR) -> dict[str, object]:
    """What `setup.py` records of the sources it compiles."""
    return {
        "python": sys.implementation.cache_tag,
        "sources": {module: digest(source_path(module, package_dir)) for module in modules},
    }


def stale_modules(modules: Sequence[str], package_dir: Path = PACKAGE_DIR) -> list[str] | None:
    """The modules whose source or extension no longer matches the build; None: no build."""
    built = [module for module in modules if extension_paths(module, package_dir)]
    if not built:
        return None
    try:
        recorded = json.loads((package_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return list(modules)
    if not isinstance(recorded, dict) or recorded.get("python") != sys.implementation.cache_tag:
        return list(modules)
    sources = recorded.get("sources", {})
    # A module compiled once but no longer in the group still shadows its source.
    dropped = [module for module in sources if module not in modules]
    return dropped + [
        module
        for module in modules
        if module not in built or sources.get(module) != digest(source_path(module, package_dir))
    ]


def decide(
    modules: Sequence[str] = MODULES,
    package_dir: Path = PACKAGE_DIR,
    environ: Mapping[str, str] = os.environ,
) -> tuple[Build, list[str]]:
    """Which build runs, and the stale modules that make it so."""
    stale = stale_modules(modules, package_dir)
    if stale is None:
        return Build.PURE, []
    if environ.get(PURE_ENV, "") not in ("", "0"):
        return Build.DISABLED, []
    if stale:
        return Build.STALE, stale
    return Build.COMPILED, []


class SourcesFirst:
    """A meta path finder that loads the group's modules from their sources."""

    def __init__(self, modules: Sequence[str], package_dir: Path) -> None:
        sources = {module: source_path(module, package_dir) for module in modules}
        self._paths = {module: str(path) for module, path in sources.items() if path.exists()}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self._paths.get(fullname)
        if source is None:
            return None
        loader = importlib.machinery.SourceFileLoader(fullname, source)
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


BUILD = Build.PURE


def install_guard() -> Build:
    """Run the sources unless the compiled build is present, current and wanted."""
    global BUILD
    BUILD, stale = decide()
    if BUILD in (Build.STALE, Build.DISABLED):
        sys.meta_path.insert(0, SourcesFirst([*MODULES, *stale], PACKAGE_DIR))
    if BUILD is Build.STALE:
        shown = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
        warnings.warn(
            f"kafkacoord's compiled modules are older than their sources ({shown}); the"
            " sources run instead. Rebuild with ./dev.sh build (or pip install -e .).",
            StaleBuildWarning,
            stacklevel=2,
        )
    return BUILD
