"""KIP-848 consumer groups: server-side assignment, member epochs and incremental
reconciliation (docs/architecture.md#consumer-groups)."""

from .coordinator import CONSUMER_GROUP_KEYS, ConsumerGroups, TopicsImage
from .group import ConsumerGroup, ConsumerGroupState
from .member import ConsumerMember
from .reconciliation import reconcile

__all__ = [
    "CONSUMER_GROUP_KEYS",
    "ConsumerGroup",
    "ConsumerGroupState",
    "ConsumerGroups",
    "ConsumerMember",
    "TopicsImage",
    "reconcile",
]
