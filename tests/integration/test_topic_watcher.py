"""The group service's topic watcher against a real broker: topics every refresh, racks
only when the brokers change or their interval passes."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.server.services.topic_metadata import TopicsImage, TopicWatcher
from kafkacoord.storage.clients import admin_client

pytestmark = pytest.mark.integration


class CountingAdmin:
    """The real admin client, counting the DescribeCluster calls that reach it."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin
        self.describes = 0

    def list_topics(self, **kwargs: Any) -> Any:
        return self._admin.list_topics(**kwargs)

    def describe_cluster(self, **kwargs: Any) -> Any:
        self.describes += 1
        return self._admin.describe_cluster(**kwargs)


def test_topics_every_refresh_racks_only_when_due(bootstrap: str, prefix: str) -> None:
    admin = CountingAdmin(admin_client(bootstrap))
    seen: list[TopicsImage] = []
    now = [0.0]
    watcher = TopicWatcher(admin, hidden=lambda name: False, on_change=seen.append,
                           racks_interval_s=60.0, clock=lambda: now[0])  # fmt: skip
    assert watcher.refresh()
    assert admin.describes == 1

    topic = f"{prefix}watched"
    admin._admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    for _ in range(50):  # the broker's topic list catches up
        watcher.refresh()
        if watcher.image and topic in watcher.image:
            break
    assert watcher.image is not None and watcher.image[topic].num_partitions == 3
    assert seen[-1] is watcher.image
    assert admin.describes == 1  # same brokers, within the interval: no new DescribeCluster

    now[0] = 61.0
    watcher.refresh()
    assert admin.describes == 2
