"""The appender the tests and benches write with (tests/appender.py) on a real broker:
durable acks, order, group commit, failures."""

from __future__ import annotations

import threading

import pytest

from kafkacoord.storage.broker import free_port
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.appender import Appended, Appender, PendingRecord

from .helpers import read_partition

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(bootstrap: str, prefix: str) -> str:
    topics = InternalTopics(prefix=prefix, offsets_partitions=2)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    return topics.offsets


def test_acknowledged_records_are_in_the_log_in_order(bootstrap: str, topic: str) -> None:
    with Appender(bootstrap) as appender:
        futures = [appender.append(topic, 1, b"k%d" % i, b"v%d" % i) for i in range(500)]
        futures.append(appender.append(topic, 1, b"k0", None))
        results = [f.result(timeout=30) for f in futures]
    assert results == [Appended(topic, 1, i) for i in range(501)]
    log = read_partition(bootstrap, topic, 1)
    assert log[:3] == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]
    assert log[-1] == (500, b"k0", None)


def test_concurrent_appenders_share_batches_and_lose_nothing(bootstrap: str, topic: str) -> None:
    with Appender(bootstrap, linger_ms=5) as appender:
        offsets: list[int] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            batch = [PendingRecord(topic, 0, b"w%d-%d" % (n, i), b"x") for i in range(200)]
            done = [f.result(timeout=30).offset for f in appender.append_many(batch)]
            with lock:
                offsets.extend(done)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(offsets) == list(range(800))
    assert len(read_partition(bootstrap, topic, 0)) == 800


def test_an_unreachable_broker_fails_the_append_instead_of_acknowledging() -> None:
    appender = Appender(f"127.0.0.1:{free_port()}", producer_config={"message.timeout.ms": 1500})
    future = appender.append("nowhere", 0, b"k", b"v")
    with pytest.raises(AppendError):
        future.result(timeout=20)
    appender.close(timeout_s=1)
