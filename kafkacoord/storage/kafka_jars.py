"""Java and the Apache Kafka jars for the embedded Kafka broker.

The jars are resolved once by Maven (``kafka/pom.xml``, shipped with the package) into a
cache directory outside the source tree; a marker written after a complete copy makes
later starts skip Maven entirely.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path

import structlog

from .errors import EmbeddedBrokerError

log = structlog.get_logger(__name__)

KAFKA_VERSION = "4.4.0"
MIN_JAVA = 17
HOME_ENV = "KAFKACOORD_KAFKA_HOME"
_MARKER = ".resolved"

_INSTALL_JAVA = "install Java 17 or newer: apt-get install openjdk-17-jre-headless"


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """Where the jars are cached: ``$KAFKACOORD_KAFKA_HOME`` or ``~/.cache/kafkacoord``."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_root / "kafkacoord" / f"kafka-{version}"


def java_binary() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``; Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    found = None
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        found = str(Path(java_home) / "bin" / "java")
    found = found or shutil.which("java")
    if found is None:
        raise EmbeddedBrokerError(
            f"the embedded Kafka broker needs java, not found on PATH or in JAVA_HOME; "
            f"{_INSTALL_JAVA}"
        )
    major = java_major(found)
    if major < MIN_JAVA:
        raise EmbeddedBrokerError(
            f"the embedded Kafka broker needs Java {MIN_JAVA} or newer, {found} is Java "
            f"{major}; {_INSTALL_JAVA} (or point JAVA_HOME at it)"
        )
    return found


@cache
def java_major(java: str) -> int:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=True
        ).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedBrokerError(f"{java} -version failed: {exc}; {_INSTALL_JAVA}") from exc
    # "1.8.0_392" is Java 8; "17.0.15" and "21" are themselves.
    match = re.search(r'version "(?:1\.)?(\d+)', out)
    if match is None:
        raise EmbeddedBrokerError(f"cannot tell the Java version of {java} from: {out.strip()}")
    return int(match.group(1))


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """The broker's classpath, resolving the jars first if they are not cached yet."""
    libs = resolve_jars(version)
    return str(libs / "*")


def resolve_jars(version: str = KAFKA_VERSION) -> Path:
    home = kafka_home(version)
    libs = home / "libs"
    if (home / _MARKER).is_file():
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home / ".lock"):
        if (home / _MARKER).is_file():  # another process resolved them while we waited
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EmbeddedBrokerError(
                f"resolving the Apache Kafka {version} jars needs Maven (mvn), not found on "
                f"PATH; install it: apt-get install maven (or put the jars in {libs} and "
                f"create {home / _MARKER})"
            )
        log.info(f"resolving Apache Kafka {version} jars into {libs}")
        staging = home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        with resources.as_file(resources.files(__package__) / "kafka" / "pom.xml") as pom:
            cmd = [
                mvn, "-q", "-B", "-f", str(pom), f"-Dkafka.version={version}",
                "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
            ]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise EmbeddedBrokerError(
                f"mvn could not resolve Apache Kafka {version} (exit {done.returncode}): "
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        (home / _MARKER).write_text(f"{version}\n")
    return libs


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
