"""Log end offsets must be exact, even where ListOffsets undercounts batched records."""

from __future__ import annotations

import socket

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
