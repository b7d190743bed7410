"""Fixtures of the integration tests: internal topics, clients, private brokers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.routes import StaticRoutes
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.failures.broker import EmbeddedBrokerControl


@pytest.fixture
def topics(bootstrap: str, prefix: str) -> InternalTopics:
    """A fresh set of internal topics, created up front."""
    t = InternalTopics(prefix=prefix, offsets_partitions=2)
    ensure_topics(admin_client(bootstrap), t.specs(), replication_factor=1)
    return t


@pytest.fixture
def routes() -> StaticRoutes:
    """Routes a test sets by hand, to listeners it started itself."""
    return StaticRoutes()


@pytest.fixture
def client(
    bootstrap: str, topics: InternalTopics, routes: StaticRoutes
) -> Iterator[CoordinatorClient]:
    with CoordinatorClient(
        bootstrap, topic_prefix=topics.prefix, routes=routes, attempt_timeout_s=2.0
    ) as c:
        yield c


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[EmbeddedBrokerControl]:
    """An embedded broker of the test's own, which the test may restart or poison."""
    control = EmbeddedBrokerControl(tmp_path).start()
    try:
        yield control
    finally:
        control.stop()
