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
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import structlog
from rich.console import Console

from kafkacoord.progress import on_terminal, progress_bar

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
    progress: Console | None = None,
) -> Path:
    """``home/libs`` with the pom's dependencies, resolving them on first use.

    ``no_maven(libs)`` and ``failed(exit_code, output)`` build the caller's errors, so
    each names its own way out. The downloads show on a bar on ``progress``, by default
    on stderr when it is a terminal (never in a daemon's log or a test's output).
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
                mvn, "-B", "-f", str(pom_path), *defines,
                "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
            ]  # fmt: skip
            if progress is None and on_terminal(sys.stderr):
                progress = Console(stderr=True)
            if progress is None:
                done = subprocess.run([*cmd, "-q"], capture_output=True, text=True, check=False)
            else:
                done = _run_counting_downloads(cmd, f"Resolving {what} jars", progress)
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


def _run_counting_downloads(
    cmd: list[str], description: str, console: Console
) -> subprocess.CompletedProcess[str]:
    """Run Maven without ``-q``, so it names each download, and count them on a bar."""
    output: list[str] = []
    files = 0
    with (
        progress_bar(None, description, enabled=True, in_bytes=True, console=console) as bar,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as mvn,
    ):
        assert mvn.stdout is not None
        for line in mvn.stdout:
            output.append(line)
            size = downloaded_bytes(line)
            if size is not None:
                files += 1
                bar.advance(size)
                bar.update(detail=f"{files} files")
    return subprocess.CompletedProcess(cmd, mvn.returncode, "".join(output), "")


_DOWNLOADED = re.compile(r"Downloaded from [^:]+: \S+ \((\d+(?:\.\d+)?) (B|kB|MB|GB)\b")
_UNITS = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}


def downloaded_bytes(line: str) -> int | None:
    """The size of the file a Maven transfer line says was downloaded, if it says so:
    ``Downloaded from central: https://…/x.jar (2.1 MB at 5.3 MB/s)``."""
    match = _DOWNLOADED.search(line)
    if match is None:
        return None
    return round(float(match.group(1)) * _UNITS[match.group(2)])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
