"""Fixtures of the integration tests that talk to kafkacoord over its request topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacoord.coordinator.transport import RequestClient
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics


@pytest.fixture
def topics(bootstrap: str, prefix: str) -> InternalTopics:
    """A fresh set of internal topics, created up front."""
    t = InternalTopics(prefix=prefix, offsets_partitions=2)
    ensure_topics(admin_client(bootstrap), t.specs(), replication_factor=1)
    return t


@pytest.fixture
def client(bootstrap: str, topics: InternalTopics) -> Iterator[RequestClient]:
    with RequestClient(bootstrap, topics.responses, 8, attempt_timeout_s=2.0) as c:
        yield c
