"""Admin operations on groups: list, describe, delete, offsets (kafka-consumer-groups)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor

from kafkacoord.coordinator.groups.assignors.common import TopicPartition
from kafkacoord.coordinator.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    encode_assignment,
)
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.wire import ClientTls

from .base import GroupChannel

# Partitions per admin OffsetCommit: an encoded partition takes about 66 bytes, so a
# chunk stays well under the listener's 1 MiB request limit (socket.request.max.bytes).
RESET_CHUNK_PARTITIONS = 5_000
# What a chunk's records may take, about: its offset records and its audit record name the
# group and the topic of each partition, and the coordinator refuses a commit whose records
# do not fit one batch (INVALID_COMMIT_OFFSET_SIZE), so long names make chunks smaller.
RESET_CHUNK_BYTES = 950_000
# A partition's share of a chunk's records besides its names: offsets, timestamps, the
# record and batch framing.
_PARTITION_BYTES = 120


def reset_chunks(
    group: str, offsets: Mapping[TopicPartition, int]
) -> list[list[tuple[TopicPartition, int]]]:
    """``offsets`` in order, cut into admin commits each under both limits above."""
    chunks: list[list[tuple[TopicPartition, int]]] = []
    chunk: list[tuple[TopicPartition, int]] = []
    size, named = 0, len(group.encode())
    for item in sorted(offsets.items()):
        cost = named + 2 * len(item[0][0].encode()) + _PARTITION_BYTES
        if chunk and (len(chunk) >= RESET_CHUNK_PARTITIONS or size + cost > RESET_CHUNK_BYTES):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(item)
        size += cost
    if chunk:
        chunks.append(chunk)
    return chunks


def _by_topic(partitions: Collection[TopicPartition]) -> list[g.FetchTopic]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return [g.FetchTopic(name=t, partitions=sorted(ps)) for t, ps in sorted(topics.items())]


class GroupAdmin:
    """Group admin calls, each routed to the coordinator of its group."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic_prefix: str = "__kc_",
        offsets_partitions: int = 50,
        tls: ClientTls | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.channel = GroupChannel(
            bootstrap, topic_prefix=topic_prefix, offsets_partitions=offsets_partitions,
            tls=tls, timeout_s=timeout_s,
        )  # fmt: skip

    def list_groups(
        self, states: Collection[str] = (), *, timeout_s: float | None = None
    ) -> list[g.ListedGroup]:
        """Every shard answers for its own groups; ask them all at once. ``timeout_s``
        bounds the whole listing, not each shard's call."""
        body = g.ListGroups(states_filter=list(states))
        deadline = time.monotonic() + (timeout_s or self.channel.timeout_s)

        def listed(shard: int) -> g.ListGroupsResponse:
            # A floor above zero: the channel reads a zero timeout as "the default".
            remaining = max(deadline - time.monotonic(), 1e-3)
            return self.channel.call(shard, body, g.ListGroupsResponse, timeout_s=remaining)

        with ThreadPoolExecutor(max_workers=16) as pool:
            replies = pool.map(listed, range(self.channel.partitions))
            groups = [group for reply in replies for group in reply.groups]
        return sorted(groups, key=lambda group: group.group_id)

    def describe_groups(self, groups: Collection[str]) -> list[g.DescribedGroup]:
        """Classic and consumer (KIP-848) groups alike, in DescribeGroups' shape: a
        consumer group shows its assignor as the protocol and its epoch as the
        generation."""
        described: list[g.DescribedGroup] = []
        consumer: list[str] = []
        for shard, names in self._by_shard(groups):
            reply = self.channel.call(
                shard, g.DescribeGroups(groups=names), g.DescribeGroupsResponse
            )
            for group in reply.groups:
                # The classic API answers a consumer group as not one of its own.
                if group.error is ErrorCode.GROUP_ID_NOT_FOUND and group.protocol_type:
                    consumer.append(group.group_id)
                else:
                    described.append(group)
        described.extend(as_classic(c) for c in self.describe_consumer_groups(consumer))
        return sorted(described, key=lambda group: group.group_id)

    def describe_consumer_groups(self, groups: Collection[str]) -> list[g.DescribedConsumerGroup]:
        """KIP-848 groups (ConsumerGroupDescribe): epochs, members' epochs, assignments
        and targets."""
        described: list[g.DescribedConsumerGroup] = []
        for shard, names in self._by_shard(groups):
            reply = self.channel.call(
                shard, g.ConsumerGroupDescribe(group_ids=names), g.ConsumerGroupDescribeResponse
            )
            described.extend(reply.groups)
        return sorted(described, key=lambda group: group.group_id)

    def _by_shard(self, groups: Collection[str]) -> list[tuple[int, list[str]]]:
        by_shard: dict[int, list[str]] = {}
        for group in groups:
            by_shard.setdefault(self.channel.shard_of(group), []).append(group)
        return sorted(by_shard.items())

    def delete_groups(self, groups: Collection[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group in groups:
            reply = self.channel.call(
                self.channel.shard_of(group), g.DeleteGroups(groups=[group]), g.DeleteGroupsResponse
            )
            results.update({r.group_id: r.error for r in reply.results})
        return results

    def committed(self, group: str) -> dict[TopicPartition, g.FetchedPartition]:
        reply = self.channel.call(
            self.channel.shard_of(group), g.OffsetFetch(group_id=group), g.OffsetFetchResponse
        )
        return {(t.name, p.partition): p for t in reply.topics for p in t.partitions
                if p.offset >= 0}  # fmt: skip

    def reset_offsets(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        on_progress: Callable[[int], None] | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit as an admin (generation -1): the coordinator allows it only while the
        group is empty, as Kafka does. Sent in chunks (:func:`reset_chunks`), each
        reported to ``on_progress`` once answered; a chunk refused (the group gained a
        member meanwhile) answers for its own partitions only."""
        errors: dict[TopicPartition, ErrorCode] = {}
        for chunk in reset_chunks(group, offsets):
            errors |= self._commit_as_admin(group, chunk)
            if on_progress is not None:
                on_progress(len(chunk))
        return errors

    def _commit_as_admin(
        self, group: str, offsets: Collection[tuple[TopicPartition, int]]
    ) -> dict[TopicPartition, ErrorCode]:
        topics: dict[str, list[g.CommitPartition]] = {}
        for (topic, partition), offset in offsets:
            topics.setdefault(topic, []).append(
                g.CommitPartition(partition=partition, offset=offset)
            )
        body = g.OffsetCommit(
            group_id=group,
            topics=[g.CommitTopic(name=t, partitions=ps) for t, ps in topics.items()],
            reset=True,
        )
        reply = self.channel.call(self.channel.shard_of(group), body, g.OffsetCommitResponse)
        return {(t.name, p.partition): p.error for t in reply.topics for p in t.partitions}

    def delete_offsets(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        body = g.OffsetDelete(group_id=group, topics=_by_topic(partitions))
        reply = self.channel.call(self.channel.shard_of(group), body, g.OffsetDeleteResponse)
        return {(t.name, p.partition): p.error for t in reply.topics for p in t.partitions}

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_classic(group: g.DescribedConsumerGroup) -> g.DescribedGroup:
    if group.error is not ErrorCode.NONE:
        return g.DescribedGroup(group_id=group.group_id, error=group.error, state="Dead",
                                protocol_type="", protocol="")  # fmt: skip
    members = [
        g.DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=b"",
            assignment=encode_assignment(
                Assignment(tuple((a.topic, p) for a in m.assignment for p in a.partitions))
            ),
        )
        for m in group.members
    ]
    return g.DescribedGroup(
        group_id=group.group_id,
        state=group.state,
        protocol_type=PROTOCOL_TYPE,
        protocol=group.assignor_name,
        generation=group.group_epoch,
        members=members,
    )
