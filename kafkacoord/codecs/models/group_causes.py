"""Why a group changed (docs/architecture.md#causes): the cause a group record carries,
and the audit record of an admin action on a group (``<prefix>offsets``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Self

from .base import AvroModel

__all__ = [
    "AdminOffset",
    "GroupAdminAction",
    "GroupAdminKey",
    "GroupAdminValue",
    "GroupCause",
    "GroupCauseKind",
]


@dataclass(frozen=True, slots=True)
class GroupCause(AvroModel):
    """What started the rebalance a group record is the outcome of. ``kind`` is one of
    :class:`GroupCauseKind`'s values; the member fields name the member it was about,
    where there is one. Informational: replay never reads it."""

    kind: str
    member_id: str | None = None
    group_instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None
    detail: str | None = None


class GroupCauseKind:
    """Values of :attr:`GroupCause.kind`: a string in the record, so a new kind needs no
    new schema version."""

    MEMBER_JOINED: Final = "member_joined"
    MEMBER_LEFT: Final = "member_left"
    MEMBER_EXPIRED: Final = "member_expired"  # its session timed out
    MEMBER_REJOINED: Final = "member_rejoined"  # a member's JoinGroup (metadata may change)
    STATIC_MEMBER_REPLACED: Final = "static_member_replaced"
    SYNC_EXPIRED: Final = "sync_expired"  # members did not send SyncGroup in time
    SUBSCRIPTION_CHANGED: Final = "subscription_changed"
    SUBSCRIBED_TOPIC_CHANGED: Final = "subscribed_topic_changed"
    GROUP_MAX_SIZE_EXCEEDED: Final = "group_max_size_exceeded"
    MEMBER_REMOVED: Final = "member_removed"  # an admin removed it (LeaveGroup by instance id)
    PROTOCOL_UPGRADED: Final = "protocol_upgraded"  # a classic group became a consumer group


@dataclass(frozen=True, slots=True)
class AdminOffset(AvroModel):
    """One partition an admin action touched: its committed offset before and after
    (``None``: none committed, or deleted)."""

    topic: str
    partition: int
    before: int | None = None
    after: int | None = None


class GroupAdminAction:
    """Values of :attr:`GroupAdminValue.action`."""

    OFFSETS_RESET: Final = "offsets_reset"  # an OffsetCommit marked reset (the reset tools)
    OFFSETS_DELETED: Final = "offsets_deleted"
    GROUP_DELETED: Final = "group_deleted"


@dataclass(frozen=True, slots=True)
class GroupAdminKey(AvroModel):
    """An admin action's audit record (type tag 19): the group and the request
    (``client id:correlation id``). Written with its tombstone in the batch of the change
    it explains, so compaction keeps nothing of it and the history window keeps both."""

    group: str
    request_id: str


@dataclass(frozen=True, slots=True)
class GroupAdminValue(AvroModel):
    """Who did what to a group: the caller's principal (``None`` without client
    authentication), its client id, when, and the offsets it changed."""

    action: str
    at_ms: int
    client_id: str
    principal: str | None = None
    offsets: tuple[AdminOffset, ...] = ()

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(data["action"], data["at_ms"], data["client_id"], data["principal"],
                   tuple(AdminOffset.from_avro(o) for o in data["offsets"]))  # fmt: skip
