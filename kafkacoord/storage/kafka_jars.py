"""Java and the Apache Kafka jars for the embedded Kafka broker.

The jars are resolved once by Maven (``kafka/pom.xml``, shipped with the package) into a
cache directory outside the source tree (:mod:`kafkacoord.maven`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from importlib import resources
from pathlib import Path

from kafkacoord.maven import MARKER, cache_home, copy_dependencies

from .errors import EmbeddedBrokerError

KAFKA_VERSION = "4.4.0"
MIN_JAVA = 17
HOME_ENV = "KAFKACOORD_KAFKA_HOME"

_INSTALL_JAVA = "install Java 17 or newer: apt-get install openjdk-17-jre-headless"


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """Where the jars are cached: ``$KAFKACOORD_KAFKA_HOME`` or ``~/.cache/kafkacoord``."""
    return cache_home(HOME_ENV, f"kafka-{version}")


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
    return copy_dependencies(
        home, resources.files(__package__) / "kafka" / "pom.xml", {"kafka.version": version},
        what=f"Apache Kafka {version}",
        no_maven=lambda libs: EmbeddedBrokerError(
            f"resolving the Apache Kafka {version} jars needs Maven (mvn), not found on "
            f"PATH; install it: apt-get install maven (or put the jars in {libs} and "
            f"create {home / MARKER})"
        ),
        failed=lambda code, output: EmbeddedBrokerError(
            f"mvn could not resolve Apache Kafka {version} (exit {code}): {output[-2000:]}"
        ),
    )  # fmt: skip
