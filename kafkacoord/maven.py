"""Jars resolved once by Maven into a cache directory outside the source tree.

``mvn dependency:copy-dependencies`` runs against a ``pom.xml`` shipped with the
package, into a staging directory that is renamed into place; a marker written after
a complete copy makes later calls skip Maven, and a file lock keeps two processes
from resolving at once. The marker names the pom's digest, so a release whose pom
adds a jar resolves again; an empty marker (jars put in place by hand) is trusted.
Used for the embedded Kafka broker and Spark's Kafka source.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

MARKER = ".resolved"


def cache_home(env_var: str, name: str) -> Path:
    """``$env_var`` if set, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)``/kafkacoord/name``."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var]).expanduser()
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_root / "kafkacoord" / name


def copy_dependencies(
    home: Path,
    pom: Traversable,
    properties: Mapping[str, str],
    *,
    what: str,
    no_maven: Callable[[Path], Exception],
    failed: Callable[[int, str], Exception],
) -> Path:
    """``home/libs`` with the pom's dependencies, resolving them on first use.

    ``no_maven(libs)`` and ``failed(exit_code, output)`` build the caller's errors, so
    each names its own way out.
    """
    libs = home / "libs"
    stamp = f"{next(iter(properties.values()), '')} {_digest(pom)}\n"
    if _resolved(home / MARKER, stamp):
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home / ".lock"):
        if _resolved(home / MARKER, stamp):  # another process resolved them meanwhile
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise no_maven(libs)
        log.info(f"resolving {what} jars into {libs}")
        staging = home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        with resources.as_file(pom) as pom_path:
            defines = [f"-D{key}={value}" for key, value in properties.items()]
            cmd = [
                mvn, "-q", "-B", "-f", str(pom_path), *defines,
                "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
            ]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise failed(done.returncode, (done.stdout + done.stderr).strip())
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        (home / MARKER).write_text(stamp)
    return libs


def _digest(pom: Traversable) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:16]


def _resolved(marker: Path, stamp: str) -> bool:
    try:
        found = marker.read_text()
    except FileNotFoundError:
        return False
    return found in ("", stamp)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
