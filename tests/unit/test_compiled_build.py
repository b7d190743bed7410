"""The compiled hot path runs only when it was built from the sources that are there now."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkacoord
from kafkacoord import compiled
from kafkacoord.compiled import Build, SourcesFirst, decide, manifest_for

REPO = Path(__file__).resolve().parents[2]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
MODULES = ("kafkacoord.a", "kafkacoord.sub.b")
# CI builds the hot path and runs every test against it (.ci/run sets this).
REQUIRED = os.environ.get("KAFKACOORD_REQUIRE_COMPILED", "") not in ("", "0")


def _package(tmp_path: Path, *, built: tuple[str, ...] = MODULES, manifest: bool = True) -> Path:
    package = tmp_path / "kafkacoord"
    for module in MODULES:
        source = compiled.source_path(module, package)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"NAME = {module!r}\n")
    for module in built:
        compiled.source_path(module, package).with_suffix(SUFFIX).write_bytes(b"not loaded here")
    if manifest:
        (package / compiled.MANIFEST).write_text(json.dumps(manifest_for(MODULES, package)))
    return package


def test_no_extension_means_the_sources_run(tmp_path: Path) -> None:
    package = _package(tmp_path, built=(), manifest=False)
    assert decide(MODULES, package, {}) == (Build.PURE, [])


def test_a_build_from_these_sources_runs_compiled(tmp_path: Path) -> None:
    assert decide(MODULES, _package(tmp_path), {}) == (Build.COMPILED, [])


def test_an_edited_source_makes_the_build_stale(tmp_path: Path) -> None:
    package = _package(tmp_path)
    compiled.source_path("kafkacoord.sub.b", package).write_text("NAME = 'edited'\n")
    assert decide(MODULES, package, {}) == (Build.STALE, ["kafkacoord.sub.b"])


def test_a_module_without_its_extension_makes_the_build_stale(tmp_path: Path) -> None:
    package = _package(tmp_path, built=("kafkacoord.a",))
    assert decide(MODULES, package, {}) == (Build.STALE, ["kafkacoord.sub.b"])


def test_no_manifest_or_another_python_makes_every_module_stale(tmp_path: Path) -> None:
    package = _package(tmp_path, manifest=False)
    assert decide(MODULES, package, {}) == (Build.STALE, list(MODULES))
    manifest = manifest_for(MODULES, package) | {"python": "cpython-299"}
    (package / compiled.MANIFEST).write_text(json.dumps(manifest))
    assert decide(MODULES, package, {}) == (Build.STALE, list(MODULES))
    (package / compiled.MANIFEST).write_text("{not json")
    assert decide(MODULES, package, {}) == (Build.STALE, list(MODULES))


def test_a_module_dropped_from_the_group_is_sent_to_its_source(tmp_path: Path) -> None:
    package = _package(tmp_path)
    assert decide(MODULES[:1], package, {}) == (Build.STALE, ["kafkacoord.sub.b"])


def test_kafkacoord_pure_runs_the_sources_of_a_current_build(tmp_path: Path) -> None:
    package = _package(tmp_path)
    assert decide(MODULES, package, {"KAFKACOORD_PURE": "1"}) == (Build.DISABLED, [])
    assert decide(MODULES, package, {"KAFKACOORD_PURE": "0"}) == (Build.COMPILED, [])


def test_the_finder_loads_the_groups_sources_and_nothing_else(tmp_path: Path) -> None:
    package = _package(tmp_path)
    compiled.source_path("kafkacoord.a", package).unlink()
    finder = SourcesFirst(MODULES, package)
    spec = finder.find_spec("kafkacoord.sub.b")
    assert spec is not None
    assert spec.origin == str(package / "sub" / "b.py")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    assert finder.find_spec("kafkacoord.a") is None  # no source: left to the usual finders
    assert finder.find_spec("kafkacoord.other") is None


def test_every_module_of_the_group_has_its_source() -> None:
    assert len(set(compiled.MODULES)) == len(compiled.MODULES)
    for module in compiled.MODULES:
        assert compiled.source_path(module).is_file(), module


def _origins(env: dict[str, str], package_root: Path = REPO) -> dict[str, object]:
    script = (
        "import importlib, json, kafkacoord\n"
        "from kafkacoord import compiled\n"
        "files = {m: importlib.import_module(m).__file__ for m in compiled.MODULES}\n"
        "print(json.dumps({'build': kafkacoord.BUILD.value, 'files': files}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True,
        cwd=package_root, env={**os.environ, "PYTHONPATH": str(package_root), **env},
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def test_the_loaded_modules_are_the_build_the_guard_chose() -> None:
    if REQUIRED:
        assert kafkacoord.BUILD is Build.COMPILED, "CI must run the tests against the build"
    as_built = decide(environ={})[0]
    result = _origins({"KAFKACOORD_PURE": "0"})
    files = result["files"]
    assert isinstance(files, dict)
    assert result["build"] == as_built.value
    compiled_now = as_built is Build.COMPILED
    for module, file in files.items():
        assert file.endswith(SUFFIX) == compiled_now, (module, file)


def test_kafkacoord_pure_loads_every_source() -> None:
    result = _origins({"KAFKACOORD_PURE": "1"})
    files = result["files"]
    assert isinstance(files, dict)
    assert result["build"] in (Build.DISABLED.value, Build.PURE.value)
    assert all(file.endswith(".py") for file in files.values()), files


def test_an_edited_source_runs_instead_of_its_stale_extension(tmp_path: Path) -> None:
    if decide(environ={})[0] is not Build.COMPILED:
        assert not REQUIRED
        pytest.skip("no compiled build here; CI builds one and runs this")
    copy = tmp_path / "kafkacoord"
    shutil.copytree(REPO / "kafkacoord", copy, ignore=shutil.ignore_patterns("__pycache__"))
    edited = compiled.source_path("kafkacoord.coordinator.runtime.clock", copy)
    edited.write_text(edited.read_text() + "\nEDITED = True\n")
    result = _origins({"KAFKACOORD_PURE": "0"}, tmp_path)
    files = result["files"]
    assert isinstance(files, dict)
    assert result["build"] == Build.STALE.value
    assert "StaleBuildWarning" in str(result["stderr"])
    assert "kafkacoord.coordinator.runtime.clock" in str(result["stderr"])
    # All of the group or none: compiled modules call each other's compiled code.
    assert all(file.startswith(str(copy)) and file.endswith(".py") for file in files.values())
