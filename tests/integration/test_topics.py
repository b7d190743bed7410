"""Internal topics on a real broker: creation, verification, clear errors."""

from __future__ import annotations

import time

import pytest
import structlog.testing
from confluent_kafka.admin import ConfigResource, NewTopic

from kafkacoord.storage.broker import free_port
from kafkacoord.storage.clients import admin_client, broker_count
from kafkacoord.storage.errors import BrokerUnavailableError, TopicConfigError
from kafkacoord.storage.topics import (
    KAFKA_DELETE_RETENTION_MS,
    InternalTopics,
    delete_retention,
    ensure_topics,
)

pytestmark = pytest.mark.integration


def test_topics_are_created_with_their_configs_and_verified_idempotently(
    bootstrap: str, prefix: str
) -> None:
    admin = admin_client(bootstrap)
    topics = InternalTopics(prefix=prefix, offsets_partitions=5)
    first = ensure_topics(admin, topics.specs(), replication_factor=1)
    assert set(first) == {topics.metadata, topics.offsets}, "requests travel over no topic"
    assert len(set(first.values())) == 2, "every topic has its own identity"

    metadata = admin.list_topics(timeout=10).topics
    assert len(metadata[topics.offsets].partitions) == 5
    assert len(metadata[topics.metadata].partitions) == 1
    assert not any(t.startswith(prefix) for t in set(metadata) - set(first))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.offsets)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == str(100 * 1024 * 1024)

    assert ensure_topics(admin, topics.specs(), replication_factor=1) == first


def test_wrong_cleanup_policy_is_a_clear_error_and_changes_nothing(
    bootstrap: str, prefix: str
) -> None:
    admin = admin_client(bootstrap)
    topics = InternalTopics(prefix=prefix, offsets_partitions=2)
    admin.create_topics([NewTopic(topics.offsets, 2, 1)])[topics.offsets].result()
    with pytest.raises(TopicConfigError) as raised:
        ensure_topics(admin, topics.specs(), replication_factor=1)
    message = str(raised.value)
    assert topics.offsets in message and "cleanup.policy=delete" in message
    assert "--add-config cleanup.policy=compact" in message
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.offsets)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs.get("cleanup.policy") is None or configs["cleanup.policy"].value == "delete"


def test_wrong_partition_count_is_a_clear_error(bootstrap: str, prefix: str) -> None:
    admin = admin_client(bootstrap)
    ensure_topics(
        admin, InternalTopics(prefix=prefix, offsets_partitions=3).specs(), replication_factor=1
    )
    with pytest.raises(
        TopicConfigError, match=rf"'{prefix}offsets' has 3 partitions .* configured for 4"
    ):
        ensure_topics(
            admin, InternalTopics(prefix=prefix, offsets_partitions=4).specs(), replication_factor=1
        )


def test_missing_broker_is_a_clear_error() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match=r"cannot reach Kafka at '127\.0\.0\.1:"):
        broker_count(admin_client(bootstrap), bootstrap, timeout_s=2)
    assert time.monotonic() - started < 10


def test_recovery_learns_each_topics_own_delete_retention(bootstrap: str, prefix: str) -> None:
    admin = admin_client(bootstrap)
    short, plain = f"{prefix}short", f"{prefix}plain"
    configs = {"cleanup.policy": "compact"}
    futures = admin.create_topics([
        NewTopic(short, 1, 1, config={**configs, "delete.retention.ms": "1234"}),
        NewTopic(plain, 1, 1, config=configs),
    ])  # fmt: skip
    for future in futures.values():
        future.result(30)
    found = delete_retention(admin, [short, plain])
    assert found == {short: 1234, plain: KAFKA_DELETE_RETENTION_MS}


def test_a_shorter_history_window_on_an_existing_topic_is_used_with_a_warning(
    bootstrap: str, prefix: str
) -> None:
    """An operator's shorter min.compaction.lag.ms shortens history but is not refused:
    the daemon serves on and says how to lengthen it."""
    admin = admin_client(bootstrap)
    topics = InternalTopics(prefix=prefix, offsets_partitions=2, history_window_ms=86_400_000)
    short = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    for name, partitions in ((topics.metadata, 1), (topics.offsets, 2)):
        admin.create_topics([NewTopic(name, partitions, 1, config=short)])[name].result()
    with structlog.testing.capture_logs() as logs:
        identities = ensure_topics(admin, topics.specs(), replication_factor=1)
    assert set(identities) == {topics.metadata, topics.offsets}
    warned = {e["topic"]: e for e in logs if e["event"].startswith("internal topic keeps history")}
    assert set(warned) == {topics.metadata, topics.offsets}, logs
    fix = warned[topics.offsets]["fix"]
    assert f"--entity-name {topics.offsets}" in fix and "min.compaction.lag.ms=86400000" in fix
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.offsets)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["min.compaction.lag.ms"].value == "60000", "nothing is altered"
