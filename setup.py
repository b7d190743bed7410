"""Compiles the listener's hot path with mypyc (the modules in kafkacoord/compiled.py).

Only with KAFKACOORD_COMPILE=1, in an environment that has the package's dependencies
and its `build` extra: mypyc type-checks the whole package against them, which an
isolated build environment does not have. `./dev.sh` runs

    KAFKACOORD_COMPILE=1 .venv/bin/python setup.py build_ext --inplace

and `pip wheel --no-build-isolation .` with KAFKACOORD_COMPILE=1 builds a compiled
wheel. Without it the package is pure Python. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _compiled_module() -> Any:
    # Loaded by path: importing the package would need its dependencies at build time.
    spec = importlib.util.spec_from_file_location(
        "_kafkacoord_compiled", ROOT / "kafkacoord" / "compiled.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compiled = _compiled_module()


class BuildWithManifest(build_ext):
    """Builds the extensions, then records the digests of the sources they came from."""

    def run(self) -> None:
        package_dir = ROOT / "kafkacoord"
        if self.inplace:
            # A module dropped from the group must not leave its old extension behind.
            for suffix in compiled.importlib.machinery.EXTENSION_SUFFIXES:
                for stale in package_dir.rglob(f"*{suffix}"):
                    stale.unlink()
        manifest = compiled.manifest_for(compiled.MODULES, package_dir)
        super().run()
        target = package_dir if self.inplace else Path(self.build_lib) / "kafkacoord"
        target.mkdir(parents=True, exist_ok=True)
        (target / compiled.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def _extensions() -> list[Any]:
    if os.environ.get("KAFKACOORD_COMPILE", "") in ("", "0"):
        return []
    from mypyc.build import mypycify

    sources = [str(compiled.source_path(m, Path("kafkacoord"))) for m in compiled.MODULES]
    return list(mypycify(sources, group_name=compiled.GROUP, opt_level="3"))


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildWithManifest})
