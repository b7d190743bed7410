"""A group as of an instant, read from its shard's partition of the offsets topic.

The records of the group up to the instant are replayed into a group shard, the
daemon's own state machine, which is then loaded as a coordinator loading that prefix
of the log would be: a classic group from its last ``GroupMetadataValue`` (Stable with
members, else Empty), a consumer group from its ``ConsumerGroup*`` records, offsets
from their commits and tombstones. Describing it asks the shard the same requests
``groups describe`` sends a live coordinator, so the answers have the same shape.

Exact inside the offsets topic's history window (``min.compaction.lag.ms``, see
:mod:`.metadata_history`). Records of a fenced shard leader (a zombie's late appends)
are left out, as the daemons leave them out (the read's leader-epoch fence).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kafkacoord.codecs import OFFSETS_TOPIC_TYPES, RecordType
from kafkacoord.codecs.records import group_key_filter
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.runtime.shard import Record, Request, RequestRef
from kafkacoord.storage.log_history import LoggedRecord, read_log
from kafkacoord.storage.topics import InternalTopics

from .errors import B
from .group_admin import as_classic
from .metadata_history import history_window

__all__ = ["NO_WAREHOUSE_HISTORY", "GroupAsOf", "group_as_of"]

_REF = RequestRef("kafkacoord-as-of", 0)
_GROUP_TYPES = OFFSETS_TOPIC_TYPES - {RecordType.SHARD_LEADER}

# Where instants older than the window could be answered: nowhere, yet.
NO_WAREHOUSE_HISTORY = (
    "A views warehouse does not help here: it keeps each group's committed offsets and "
    "lag by the minute (lag_samples, the lag_history view) but not its members, "
    "generations or assignments, so the group as of an older instant is not known"
)


@dataclass(slots=True)
class GroupAsOf:
    """A group as a coordinator that loaded the log up to an instant would describe it:
    the describe and offset-fetch calls of :class:`~.group_admin.GroupAdmin`."""

    group: str
    shard: int
    instant_ms: int
    _state: GroupShard

    def describe_groups(self, groups: Collection[str]) -> list[g.DescribedGroup]:
        """Classic and consumer groups alike, in DescribeGroups' shape (as GroupAdmin)."""
        [classic] = self._ask("DescribeGroups", g.DescribeGroups(groups=[self.group]),
                              g.DescribeGroupsResponse).groups  # fmt: skip
        if classic.error is ErrorCode.GROUP_ID_NOT_FOUND and classic.protocol_type:
            return [as_classic(c) for c in self.describe_consumer_groups(groups)]
        return [classic]

    def describe_consumer_groups(self, groups: Collection[str]) -> list[g.DescribedConsumerGroup]:
        body = g.ConsumerGroupDescribe(group_ids=[self.group])
        return self._ask("ConsumerGroupDescribe", body, g.ConsumerGroupDescribeResponse).groups

    def committed(self, group: str) -> dict[tuple[str, int], g.FetchedPartition]:
        reply = self._ask("OffsetFetch", g.OffsetFetch(group_id=self.group), g.OffsetFetchResponse)
        return {(t.name, p.partition): p for t in reply.topics for p in t.partitions
                if p.offset >= 0}  # fmt: skip

    def _ask(self, api: str, body: Body, response: type[B]) -> B:
        [reply] = self._state.handle(Request(_REF, api, body), self.instant_ms).replies
        if not isinstance(reply.body, response):
            raise RuntimeError(f"{api} as of the instant failed: {reply.error.name}")
        return reply.body


def fold_group(
    group: str, shard: int, records: Iterable[LoggedRecord], instant_ms: int
) -> GroupAsOf:
    """``group`` from its shard's records up to ``instant_ms``, in log order (pure)."""
    state = GroupShard(GroupConfig(), shard)
    for logged in records:
        if getattr(logged.key, "group", None) == group:
            state.replay(Record(logged.key, logged.value))
    state.on_loaded(instant_ms)  # what it writes on loading is not the state then: dropped
    return GroupAsOf(group, shard, instant_ms, state)


def group_as_of(
    bootstrap: str, topics: InternalTopics, group: str, instant_ms: int, now_ms: int
) -> GroupAsOf:
    """``group`` as it stood at ``instant_ms``; HistoryUnavailableError if the log cannot
    say."""
    shard = partition_for(group, topics.offsets_partitions)
    read = read_log(
        bootstrap, topics.offsets, shard, until_ms=instant_ms, wants=group_key_filter(group),
        allowed=_GROUP_TYPES, client_id="kafkacoord-as-of", leader_fenced=True,
    )  # fmt: skip
    history_window(bootstrap, topics.offsets, topics.history_window_ms).check(
        instant_ms, now_ms, read, topic=f"the offsets topic {topics.offsets}",
        earlier=NO_WAREHOUSE_HISTORY,
    )  # fmt: skip
    return fold_group(group, shard, read.records, instant_ms)
