"""Topic config changes (Kafka's IncrementalAlterConfigs for topics).

KIP-966: a topic whose ``min.insync.replicas`` changes loses the ELR and last known
ELR of its partitions. They were computed against the old minimum, so they may no
longer mean "holds every committed record" (a raised minimum makes writes that were
committed under the old one look short); the next ISR change computes them afresh.
"""

from __future__ import annotations

from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import (
    AlterTopicConfigs,
    AlterTopicConfigsResponse,
    DescribedConfig,
    DescribeTopicConfigs,
    DescribeTopicConfigsResponse,
)

from .batch import Batch
from .config import MIN_INSYNC_REPLICAS, ControllerConfig, validate_topic_configs
from .partition_change import partition_change
from .records import topic_value

__all__ = ["TopicConfigManager"]


class TopicConfigManager:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config

    def alter(self, batch: Batch, body: AlterTopicConfigs) -> AlterTopicConfigsResponse:
        topic = batch.topic(body.topic)
        if topic is None or topic.deleting:
            raise ProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"topic {body.topic!r} does not exist")  # fmt: skip
        both = sorted(set(body.set_configs) & set(body.delete_configs))
        if both:
            raise ProtocolError(ErrorCode.INVALID_REQUEST,
                                f"configs both set and deleted: {', '.join(both)}")  # fmt: skip
        validate_topic_configs(body.set_configs)
        configs = {k: v for k, v in topic.configs.items() if k not in body.delete_configs}
        configs.update(body.set_configs)
        if body.validate_only or configs == dict(topic.configs):
            return AlterTopicConfigsResponse(configs=configs)
        batch.put_topic(topic_value(topic, configs=configs))
        cleared = 0
        if topic.configs.get(MIN_INSYNC_REPLICAS) != configs.get(MIN_INSYNC_REPLICAS):
            cleared = self._clear_elr(batch, body.topic)
        return AlterTopicConfigsResponse(configs=configs, elr_cleared=cleared)

    def describe(self, batch: Batch, body: DescribeTopicConfigs) -> DescribeTopicConfigsResponse:
        """Every config the topic sets or the controller has a default for."""
        topic = batch.topic(body.topic)
        if topic is None or topic.deleting:
            raise ProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"topic {body.topic!r} does not exist")  # fmt: skip
        defaults = self.config.topic_config_defaults()
        return DescribeTopicConfigsResponse(configs=[
            DescribedConfig(
                name=name, value=topic.configs.get(name, defaults.get(name, "")),
                default=defaults.get(name),
                source="DYNAMIC_TOPIC_CONFIG" if name in topic.configs else "DEFAULT_CONFIG",
            )
            for name in sorted(set(defaults) | set(topic.configs))
        ])  # fmt: skip

    @staticmethod
    def _clear_elr(batch: Batch, topic: str) -> int:
        cleared = 0
        for old in batch.image.partitions_of(topic):
            current = batch.partition(old.topic, old.partition) or old
            if partition_change(batch, current).clear_elr().put() is not current:
                cleared += 1
        return cleared
