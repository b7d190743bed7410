"""Shared fixtures: a real Kafka-compatible broker for every integration test.

``KAFKACOORD_BOOTSTRAP`` points the tests at an existing cluster (Apache Kafka,
say); otherwise one embedded tansu broker serves the whole session.
``kafka_bootstrap`` is always Apache Kafka: ``KAFKACOORD_KAFKA_BOOTSTRAP`` (``./dev.sh kafka``
prints one), else one embedded KafkaBroker for the session, started on first use.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

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
