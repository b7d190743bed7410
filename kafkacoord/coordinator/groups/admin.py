"""The group shard's admin APIs: ListGroups, DescribeGroups, DeleteGroups and
ConsumerGroupDescribe (the admin half of Kafka's ``GroupMetadataManager``).

They read the shard's classic and consumer groups and its offsets; DeleteGroups returns
tombstones, which replay applies. Nothing here changes state in memory.
"""

from __future__ import annotations

from kafkacoord.codecs.models import AdminOffset, GroupAdminAction
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record, Reply, RequestRef, Result

from .audit import admin_records
from .classic_group import ClassicGroup
from .consumer import ConsumerGroups
from .consumer.records import group_tombstones as consumer_group_tombstones
from .consumer_protocol import PROTOCOL_TYPE
from .offsets import OffsetStore
from .records import group_metadata_tombstone, offset_commit_tombstone
from .state import GroupState

__all__ = ["GroupAdmin"]


class GroupAdmin:
    """Admin requests over the groups of one offsets partition."""

    def __init__(
        self, groups: dict[str, ClassicGroup], consumer: ConsumerGroups, offsets: OffsetStore
    ) -> None:
        self._groups = groups  # the shard's, read only
        self._consumer = consumer
        self._offsets = offsets

    def list_groups(self, ref: RequestRef, body: api.ListGroups) -> Result:
        wanted = {s.lower() for s in body.states_filter}
        listed = [
            api.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type or "", state=g.state.value
            )
            for g in self._groups.values()
        ]
        listed.extend(
            api.ListedGroup(
                group_id=g.group_id,
                protocol_type=PROTOCOL_TYPE,
                state=g.state.value,
                group_type="consumer",
            )
            for g in self._consumer.groups.values()
        )
        groups = sorted(
            (g for g in listed if not wanted or g.state.lower() in wanted),
            key=lambda g: g.group_id,
        )
        response = api.ListGroupsResponse(groups=groups)
        return Result(replies=[Reply(ref, "ListGroups", body=response)])

    def describe_groups(self, ref: RequestRef, body: api.DescribeGroups) -> Result:
        described = [self._describe(group_id) for group_id in body.groups]
        response = api.DescribeGroupsResponse(groups=described)
        return Result(replies=[Reply(ref, "DescribeGroups", body=response)])

    def describe_consumer_groups(self, ref: RequestRef, body: api.ConsumerGroupDescribe) -> Result:
        described = [self._consumer.describe(g) for g in body.group_ids]
        response = api.ConsumerGroupDescribeResponse(groups=described)
        return Result(replies=[Reply(ref, "ConsumerGroupDescribe", body=response)])

    def _describe(self, group_id: str) -> api.DescribedGroup:
        if not group_id:
            return _not_described(group_id, ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(group_id)
        if group is None and group_id in self._consumer.groups:
            # Kafka's answer: this API describes classic groups (ConsumerGroupDescribe the rest).
            return _not_described(group_id, ErrorCode.GROUP_ID_NOT_FOUND, PROTOCOL_TYPE)
        if group is None:
            return _not_described(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        # Kafka shows the protocol and member metadata only for a Stable group.
        stable = group.state is GroupState.STABLE
        members = [
            api.DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(group.protocol) if stable else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        return api.DescribedGroup(
            group_id=group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol=(group.protocol or "") if stable else "",
            generation=group.generation,
            leader=group.leader,
            members=members,
        )

    def delete_groups(self, ref: RequestRef, body: api.DeleteGroups, now: int) -> Result:
        """Empty groups go, with their offsets; groups with members stay (NON_EMPTY_GROUP).
        Each deletion is audited (:mod:`.audit`)."""
        records: list[Record] = []
        results: list[api.GroupResult] = []
        deleted: set[str] = set()
        for group_id in body.groups:
            error = ErrorCode.NONE
            group = self._groups.get(group_id)
            consumer = self._consumer.groups.get(group_id)
            if not group_id:
                error = ErrorCode.INVALID_GROUP_ID
            elif group_id in deleted:
                pass  # named twice: deleted once
            elif consumer is not None:
                if consumer.is_empty:
                    deleted.add(group_id)
                    records.extend(self._audit(ref, group_id, now))
                    records.extend(self._offset_tombstones(group_id))
                    records.extend(consumer_group_tombstones(group_id))
                else:
                    error = ErrorCode.NON_EMPTY_GROUP
            elif group is None or group.state is GroupState.DEAD:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty:
                error = ErrorCode.NON_EMPTY_GROUP
            else:
                deleted.add(group_id)
                records.extend(self._audit(ref, group_id, now))
                records.extend(self._offset_tombstones(group_id))
                records.append(group_metadata_tombstone(group_id))
            results.append(api.GroupResult(group_id=group_id, error=error))
        response = api.DeleteGroupsResponse(results=results)
        return Result(records, [Reply(ref, "DeleteGroups", body=response)])

    def _audit(self, ref: RequestRef, group_id: str, now: int) -> list[Record]:
        offsets = [
            AdminOffset(topic, partition, value.offset, None)
            for (topic, partition), value in sorted(self._offsets.group_offsets(group_id).items())
        ]
        return admin_records(group_id, ref, GroupAdminAction.GROUP_DELETED, now, offsets)

    def _offset_tombstones(self, group_id: str) -> list[Record]:
        return [
            offset_commit_tombstone(group_id, topic, partition)
            for topic, partition in sorted(self._offsets.group_offsets(group_id))
        ]


def _not_described(group_id: str, error: ErrorCode, protocol_type: str = "") -> api.DescribedGroup:
    return api.DescribedGroup(
        group_id=group_id,
        error=error,
        state=GroupState.DEAD.value,
        protocol_type=protocol_type,
        protocol="",
    )
