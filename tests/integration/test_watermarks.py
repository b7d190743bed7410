"""Log end offsets must be exact, even where ListOffsets undercounts batched records."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.storage.watermarks import log_end_offsets

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
