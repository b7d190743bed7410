"""The group shards' batch producer on real brokers: merged requests, one report per
batch, and failures that lose nothing silently."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

from kafkacoord.storage.batch_producer import IoLoop, ProducerSession
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.errors import AppendError
from tests.failures.broker import EmbeddedBrokerControl

pytestmark = pytest.mark.integration

HEADERS = [("kc.epoch", b"\0\0\0\7")]
Outcome = tuple[int, AppendError | None]


@pytest.fixture
def io() -> Iterator[IoLoop]:
    loop = IoLoop("test-batch-producer-io")
    yield loop
    loop.close()


def create_topic(
    bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None
) -> str:
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    # A created topic's leaders are elected after the reply: wait, or the first
    # append may meet a partition with none yet.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        described = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(p.leader >= 0 for p in described.partitions.values())
        ):
            return name
        time.sleep(0.1)
    raise AssertionError(f"{name} has partitions without a leader after 30 s")


def read_all(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes, list]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-batch-read",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes, list]] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "timed out reading back"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error().str()
                return out
            out.append((msg.offset(), msg.value(), msg.headers() or []))
    finally:
        consumer.close()


class Outcomes:
    def __init__(self, expected: int) -> None:
        self.results: dict[str, Outcome] = {}
        self._expected = expected
        self._all = threading.Event()

    def done(self, name: str):  # type: ignore[no-untyped-def]
        def record(base: int, error: AppendError | None) -> None:
            self.results[name] = (base, error)
            if len(self.results) == self._expected:
                self._all.set()

        return record

    def wait(self) -> dict[str, Outcome]:
        assert self._all.wait(30), f"only {len(self.results)} of {self._expected} reported"
        return self.results


def held(io: IoLoop) -> threading.Event:
    """Stall the producer's loop until the returned event is set: appends queue up."""
    gate = threading.Event()
    io.post(lambda: gate.wait(10) and None)
    return gate


def test_waiting_appends_travel_in_one_request_and_report_their_own_offsets(
    bootstrap: str, prefix: str, io: IoLoop
) -> None:
    topic = create_topic(bootstrap, f"{prefix}batches", 3)
    session = ProducerSession(io, bootstrap, "test-batch", timeout_s=10)
    for partition in range(3):
        session.prepare(topic, partition)
    outcomes = Outcomes(9)
    gate = held(io)
    for n in range(9):  # three appends per partition, of 1..3 records
        records = [(b"k", f"{n}-{i}".encode()) for i in range(n % 3 + 1)]
        session.append(topic, n % 3, records, HEADERS, outcomes.done(str(n)))
    gate.set()
    results = outcomes.wait()

    assert all(error is None for _, error in results.values()), results
    # One request, one merged batch per partition.
    assert (session.stats.requests, session.stats.batches, session.stats.appends) == (1, 3, 9)
    for partition in range(3):
        log = read_all(bootstrap, topic, partition)
        values = {value: offset for offset, value, _ in log}
        for n in range(partition, 9, 3):
            base = results[str(n)][0]
            for i in range(n % 3 + 1):
                assert values[f"{n}-{i}".encode()] == base + i
        assert all(headers == HEADERS for _, _, headers in log)
        assert len(log) == sum(n % 3 + 1 for n in range(partition, 9, 3))
    session.close()


def test_pipelined_appends_land_once_and_in_order(bootstrap: str, prefix: str, io: IoLoop) -> None:
    topic = create_topic(bootstrap, f"{prefix}pipelined", 1)
    session = ProducerSession(io, bootstrap, "test-batch", timeout_s=10)
    session.prepare(topic, 0)
    outcomes = Outcomes(200)
    for n in range(200):
        session.append(topic, 0, [(b"k", str(n).encode())], HEADERS, outcomes.done(str(n)))
    results = outcomes.wait()

    assert all(error is None for _, error in results.values())
    log = read_all(bootstrap, topic, 0)
    assert [value for _, value, _ in log] == [str(n).encode() for n in range(200)]
    assert [results[str(n)][0] for n in range(200)] == [offset for offset, _, _ in log]
    assert session.stats.requests <= 200 and session.healthy
    session.close()


def test_a_partition_that_does_not_exist_is_refused_before_any_write(
    bootstrap: str, prefix: str, io: IoLoop
) -> None:
    topic = create_topic(bootstrap, f"{prefix}small", 1)
    session = ProducerSession(io, bootstrap, "test-batch", timeout_s=5)
    with pytest.raises(AppendError, match=f"no leader for {topic}-4"):
        session.prepare(topic, 4)
    outcomes = Outcomes(1)
    session.append(topic, 4, [(b"k", b"v")], HEADERS, outcomes.done("unprepared"))
    base, error = outcomes.wait()["unprepared"]
    assert base == -1 and error is not None and "not prepared" in str(error)
    session.close()


def test_a_lost_broker_fails_what_is_in_flight_and_the_session(
    private_broker: EmbeddedBrokerControl, io: IoLoop
) -> None:
    bootstrap = private_broker.bootstrap
    topic = create_topic(bootstrap, "lost", 2)
    session = ProducerSession(io, bootstrap, "test-batch", timeout_s=5)
    session.prepare(topic, 0)
    session.prepare(topic, 1)
    first = Outcomes(1)
    session.append(topic, 0, [(b"k", b"before")], HEADERS, first.done("before"))
    assert first.wait()["before"][1] is None

    private_broker.stop()
    lost = Outcomes(2)
    session.append(topic, 0, [(b"k", b"during")], HEADERS, lost.done("a"))
    session.append(topic, 1, [(b"k", b"during")], HEADERS, lost.done("b"))
    results = lost.wait()
    assert all(base == -1 and error is not None and error.retriable
               for base, error in results.values()), results  # fmt: skip
    assert not session.healthy
    later = Outcomes(1)
    session.append(topic, 1, [(b"k", b"after")], HEADERS, later.done("after"))
    assert later.wait()["after"][1] is not None  # failed for good: no silent resend
    session.close()


def test_a_partition_error_fails_that_partition_for_good_and_spares_the_others(
    bootstrap: str, prefix: str, io: IoLoop
) -> None:
    kept = create_topic(bootstrap, f"{prefix}kept", 1)
    doomed = create_topic(bootstrap, f"{prefix}doomed", 1)
    session = ProducerSession(io, bootstrap, "test-batch", timeout_s=10)
    session.prepare(kept, 0)
    session.prepare(doomed, 0)
    first = Outcomes(1)
    session.append(doomed, 0, [(b"k", b"first")], HEADERS, first.done("first"))
    assert first.wait()["first"][1] is None
    # A gap in the sequence (as after a lost request): the broker refuses the next batch.
    session._sequences[(doomed, 0)] += 5

    outcomes = Outcomes(2)
    gate = held(io)
    session.append(kept, 0, [(b"k", b"kept")], HEADERS, outcomes.done("kept"))
    session.append(doomed, 0, [(b"k", b"doomed")], HEADERS, outcomes.done("doomed"))
    gate.set()
    results = outcomes.wait()
    assert results["kept"][1] is None
    assert results["doomed"][1] is not None and f"{doomed}-0" in str(results["doomed"][1])
    assert not session.healthy  # no new writers on this producer id

    again = Outcomes(2)
    session.append(doomed, 0, [(b"k", b"small")], HEADERS, again.done("doomed"))
    session.append(kept, 0, [(b"k", b"again")], HEADERS, again.done("kept"))
    results = again.wait()
    assert results["doomed"][1] is not None
    assert results["kept"][1] is None
    assert [value for _, value, _ in read_all(bootstrap, kept, 0)] == [b"kept", b"again"]
    assert [value for _, value, _ in read_all(bootstrap, doomed, 0)] == [b"first"]
    session.close()
