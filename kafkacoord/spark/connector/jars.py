"""The jars of Spark's Kafka source and spark-avro, resolved from Maven Central once.

``pom.xml`` (shipped beside this module) names ``spark-sql-kafka-0-10_2.13`` and
``spark-avro_2.13``; Maven copies them and their runtime dependencies into a
cache outside the source tree, at the installed pyspark's version: the
connector must match Spark exactly. A marker written after a complete copy
makes later sessions skip Maven. Jars pyspark already ships (Scala, Hadoop,
compression codecs) stay off the session's list, so each class has one copy.

``spark.jars.packages`` with :data:`PACKAGES` gives a session the same jars
through Spark's own resolver, where Maven is not installed.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Final

from kafkacoord.maven import cache_home, copy_dependencies

HOME_ENV: Final = "KAFKACOORD_SPARK_CONNECTOR_HOME"
ARTIFACTS: Final = ("spark-sql-kafka-0-10_2.13", "spark-avro_2.13")
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[\w.+-]*\.jar$")


class ConnectorJarsError(RuntimeError):
    """The connector's jars could not be resolved; the message says how to get them."""


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def packages(version: str | None = None) -> str:
    """The ``spark.jars.packages`` coordinates of the connector."""
    version = version or spark_version()
    return ",".join(f"org.apache.spark:{a}:{version}" for a in ARTIFACTS)


def connector_home(version: str) -> Path:
    return cache_home(HOME_ENV, f"spark-connector-{version}")


def connector_jars(version: str | None = None) -> list[str]:
    """Paths of the jars a session needs (``spark.jars``), resolving them on first use."""
    version = version or spark_version()
    libs = resolve(version)
    shipped = {_artifact(p.name) for p in _pyspark_jars().glob("*.jar")}
    jars = sorted(str(p) for p in libs.glob("*.jar") if _artifact(p.name) not in shipped)
    missing = [a for a in ARTIFACTS if not any(Path(j).name.startswith(f"{a}-") for j in jars)]
    if missing:
        raise ConnectorJarsError(f"{libs} lacks {', '.join(missing)}; delete {libs.parent} "
                                 "to resolve the jars again")  # fmt: skip
    return jars


def _artifact(filename: str) -> str:
    match = _VERSIONED.match(filename)
    return match["artifact"] if match else filename


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def resolve(version: str) -> Path:
    return copy_dependencies(
        connector_home(version), resources.files(__package__) / "pom.xml",
        {"spark.version": version},
        what=f"Spark's Kafka connector {version}",
        no_maven=lambda libs: ConnectorJarsError(
            f"resolving Spark's Kafka connector {version} needs Maven (mvn), not found on "
            f"PATH; install it (apt-get install maven), or start Spark with "
            f"spark.jars.packages={packages(version)}"
        ),
        failed=lambda code, output: ConnectorJarsError(
            f"mvn could not resolve {packages(version)} from Maven Central (exit {code}); "
            f"the connector must match pyspark {version} exactly: {output[-1500:]}"
        ),
    )  # fmt: skip
