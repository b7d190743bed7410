"""Client libraries: consumer-group members, a group admin client, and a view of the
cluster's metadata for services built on kafkacoord.

A secured cluster: pass ``Bootstrap(servers, KafkaClientConfig.load("client.properties"))``
where a bootstrap is taken.
"""

from kafkacoord.storage.kafka_config import Bootstrap, KafkaClientConfig

from .classic_member import ClassicProtocolMember
from .cluster_view import ClusterView
from .consumer_member import ConsumerProtocolMember
from .group_admin import GroupAdmin
from .group_member import CommitFailedError, GroupMember
from .members import group_member

__all__ = [
    "Bootstrap",
    "ClassicProtocolMember",
    "ClusterView",
    "CommitFailedError",
    "ConsumerProtocolMember",
    "GroupAdmin",
    "GroupMember",
    "KafkaClientConfig",
    "group_member",
]
