"""DescribeTopicConfigs: each config a topic sets or the controller has a default for,
with its value, the controller's default and Kafka's source."""

from __future__ import annotations

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from tests.unit.controller.support import Cluster, quiet_config


def described(c: Cluster, topic: str) -> list[tuple[str, str, str | None, str]]:
    reply = c.ok(api.DescribeTopicConfigs(topic=topic))
    return [(e.name, e.value, e.default, e.source) for e in reply.configs]


def test_overrides_and_the_controllers_defaults_with_their_sources() -> None:
    c = Cluster(quiet_config(default_min_insync_replicas=2, unclean_leader_election_enable=True))
    c.add_nodes([1, 2, 3])
    c.create("t", configs={"min.insync.replicas": "3", "retention.ms": "1000"})
    assert described(c, "t") == [
        ("min.insync.replicas", "3", "2", "DYNAMIC_TOPIC_CONFIG"),
        ("retention.ms", "1000", None, "DYNAMIC_TOPIC_CONFIG"),
        ("unclean.leader.election.enable", "true", "true", "DEFAULT_CONFIG"),
    ]
    assert not c.last.records  # a read appends nothing
    c.ok(api.AlterTopicConfigs(topic="t", delete_configs=["min.insync.replicas"]))
    assert described(c, "t")[0] == ("min.insync.replicas", "2", "2", "DEFAULT_CONFIG")


def test_an_unknown_topic_is_not_found() -> None:
    c = Cluster(quiet_config())
    c.add_nodes([1])
    c.fails(api.DescribeTopicConfigs(topic="nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
