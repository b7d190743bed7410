"""A group's history read from its shard of the offsets topic, explained step by step
(:mod:`.group_explanations`): only that group's records are decoded."""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs import RecordType
from kafkacoord.codecs.records import group_key_filter
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.storage.log_history import read_log
from kafkacoord.storage.topics import InternalTopics

from .group_explanations import GroupStep, explain_group

__all__ = ["group_steps"]

# The records a group's history is made of; its offset commits are left undecoded (an
# admin action's audit record says what it did to them).
_EXPLAINED: Final = (
    RecordType.GROUP_METADATA,
    RecordType.CONSUMER_GROUP_METADATA,
    RecordType.CONSUMER_GROUP_MEMBER_METADATA,
    RecordType.GROUP_ADMIN,
)


def group_steps(bootstrap: str, topics: InternalTopics, group: str) -> list[GroupStep]:
    """The group's steps in log order; empty when the log holds no record of the group
    (a ``--since`` filters these: earlier steps set the state later ones change)."""
    shard = partition_for(group, topics.offsets_partitions)
    read = read_log(bootstrap, topics.offsets, shard, client_id="kafkacoord-explain",
                    wants=group_key_filter(group, _EXPLAINED), leader_fenced=True)  # fmt: skip
    return explain_group((r.offset, r.timestamp_ms, r.key, r.value) for r in read.records)
