"""Log end offsets must be exact, even where ListOffsets undercounts batched records."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.storage.broker_profile import APACHE_KAFKA, QUIRK_SAFE, broker_profile
from kafkacoord.storage.watermarks import EndOffsetProbe, log_end_offsets

pytestmark = pytest.mark.integration


def test_end_offsets_count_every_record_of_multi_record_batches(
    bootstrap: str, prefix: str
) -> None:
    topic = f"{prefix}user"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        future.result(30)
    # Large lingering batches: tansu's ListOffsets would say "base of last batch + 1".
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(500):
        producer.produce(topic, b"v", f"k{i}".encode(), partition=0)
    for i in range(7):
        producer.produce(topic, b"v", f"k{i}".encode(), partition=1)
    producer.flush(30)
    ends = log_end_offsets(bootstrap, [(topic, 0), (topic, 1), (topic, 2)])
    assert ends == {(topic, 0): 500, (topic, 1): 7, (topic, 2): 0}


def test_the_broker_profile_takes_the_quirk_path_only_off_apache_kafka(
    bootstrap: str, broker_kind: str, prefix: str
) -> None:
    profile = broker_profile(bootstrap)
    # tansu proves nothing, so it keeps the quirk-safe default; Kafka advertises KRaft.
    assert profile is (APACHE_KAFKA if broker_kind == "kafka" else QUIRK_SAFE)
    topic = f"{prefix}user"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(40):
        producer.produce(topic, b"v", f"k{i}".encode(), partition=0)
    producer.flush(30)
    with EndOffsetProbe(bootstrap) as probe:
        assert probe.latest([(topic, 0)]) == {(topic, 0): 40}
        # On Kafka the answer came from ListOffsets alone: no fetch consumer was opened.
        assert (probe._consumer is None) is profile.exact_list_offsets


def test_an_unreachable_bootstrap_is_quirk_safe() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        assert broker_profile(f"127.0.0.1:{port}") is QUIRK_SAFE


LOADED_PARTITIONS = 50


@pytest.mark.parametrize("bootstrap", ["tansu"], indirect=True)  # Kafka's ListOffsets is exact
def test_end_offsets_keep_up_with_a_steady_load_on_many_long_partitions(
    bootstrap: str, prefix: str
) -> None:
    """Under writes that never pause, each answer covers every record acknowledged
    before the call, and never passes the log. Waiting for partition EOF failed
    here: the embedded broker's fetch responses carry a watermark ahead of what they
    can return yet, and a short fetch wait left long partitions out of its answers."""
    topic = f"{prefix}loaded"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, LOADED_PARTITIONS, 1)])[topic].result(30)
    tps = [(topic, p) for p in range(LOADED_PARTITIONS)]
    one_per_batch = {"linger.ms": 0, "batch.num.messages": 1, "acks": "all"}
    producer = Producer({"bootstrap.servers": bootstrap, **one_per_batch})
    acked: dict[tuple[str, int], int] = {}

    def delivered(err: object, msg: Any) -> None:
        if err is None:
            tp = (topic, msg.partition())
            acked[tp] = max(acked.get(tp, 0), msg.offset() + 1)

    for i in range(300 * LOADED_PARTITIONS):  # long logs of one-record batches
        producer.produce(topic, b"v", partition=i % LOADED_PARTITIONS, on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    stop = threading.Event()

    def load() -> None:  # 500 records a second, bounded by ``stop`` and a minute
        started, sent = time.monotonic(), 0
        while not stop.is_set() and time.monotonic() - started < 60:
            due = int((time.monotonic() - started) * 500)
            for i in range(sent, due):
                producer.produce(topic, b"v", partition=i % LOADED_PARTITIONS,
                                 on_delivery=delivered)  # fmt: skip
            sent = max(sent, due)
            producer.poll(0.01)

    answers: list[dict[tuple[str, int], int]] = []
    writer = threading.Thread(target=load)
    writer.start()
    try:
        with EndOffsetProbe(bootstrap) as probe:
            hints: dict[tuple[str, int], int] = {}
            for _ in range(8):
                before = dict(acked)
                ends = probe.latest(tps, hints=hints)
                behind = {tp: (ends[tp], n) for tp, n in before.items() if ends[tp] < n}
                assert not behind, f"ends behind acknowledged records: {behind}"
                answers.append(ends)
                hints = ends
                time.sleep(0.5)
    finally:
        stop.set()
        writer.join()
    producer.flush(60)
    final = log_end_offsets(bootstrap, tps)
    assert final == acked
    past = [(tp, end, final[tp]) for ends in answers for tp, end in ends.items() if end > final[tp]]
    assert not past, f"ends past the log: {past[:5]}"
