"""Shared fixtures: a real Kafka-compatible broker for every integration test.

``KAFKACOORD_BOOTSTRAP`` points the tests at an existing cluster (Apache Kafka,
say); otherwise one embedded tansu broker serves each worker's whole session.
``kafka_bootstrap`` is always Apache Kafka: ``KAFKACOORD_KAFKA_BOOTSTRAP`` (``./dev.sh kafka``
prints one), else one embedded KafkaBroker for each worker's session, started on first use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import kafkacoord
from kafkacoord.compiled import PURE_ENV, Build
from kafkacoord.storage.broker import EmbeddedBroker
from kafkacoord.storage.kafka_broker import KafkaBroker


@pytest.fixture(scope="session", params=["tansu", "kafka"])
def bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Every test that asks for a broker runs on tansu and on Apache Kafka."""
    if request.param == "kafka":
        yield request.getfixturevalue("kafka_bootstrap")
        return
    external = os.environ.get("KAFKACOORD_BOOTSTRAP")
    if external:
        yield external
        return
    log_dir: Path = tmp_path_factory.mktemp("broker")
    with EmbeddedBroker(log_path=log_dir / "tansu.log") as broker:
        yield broker.bootstrap


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("KAFKACOORD_KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    data_dir: Path = tmp_path_factory.mktemp("kafka")
    with KafkaBroker(data_dir) as broker:
        yield broker.bootstrap


@pytest.fixture
def broker_kind(request: pytest.FixtureRequest) -> str:
    """``tansu`` or ``kafka``: the broker behind this test's ``bootstrap``."""
    callspec = getattr(request.node, "callspec", None)
    return str(callspec.params.get("bootstrap", "tansu")) if callspec else "tansu"


@pytest.fixture
def prefix() -> str:
    """A topic prefix of its own for each test, so tests never share state."""
    return f"t{uuid.uuid4().hex[:10]}_"


# Directories whose tests run on one xdist worker, in turn (``./dev.sh test`` runs
# ``--dist loadgroup``): e2e builds one Docker image for all; two fault campaigns at
# once would starve each other's timed faults; spark and ui keep one Spark session and
# one Chromium per worker, each heavy to start.
_ONE_WORKER = ("e2e", "nemesis", "spark", "ui")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        for group in _ONE_WORKER:
            if here / group in item.path.parents:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A ``sources`` test patches what compiled code calls directly (a module's function,
    a native class's method), which has no effect on it. Under a compiled build it runs
    in a child pytest against the sources, and passes only if it passed there."""
    if pyfuncitem.get_closest_marker("sources") is None or kafkacoord.BUILD is not Build.COMPILED:
        return None
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         pyfuncitem.nodeid],
        cwd=pyfuncitem.config.rootpath, env={**os.environ, PURE_ENV: "1"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    summary = child.stdout.strip().splitlines()[-1:] or ["(no output)"]
    if child.returncode != 0 or "1 passed" not in summary[0]:
        pytest.fail(f"against the sources (KAFKACOORD_PURE=1):\n{child.stdout[-4000:]}"
                    f"{child.stderr[-2000:]}", pytrace=False)  # fmt: skip
    return True
