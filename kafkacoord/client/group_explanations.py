"""Why a group changed, in plain words: its rebalances (each generation or epoch with the
cause its record carries) and the admin actions on it (docs/architecture.md#causes), in
log order. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from kafkacoord.codecs.models import (
    AvroModel,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    GroupAdminKey,
    GroupAdminValue,
    GroupCause,
    GroupMetadataKey,
    GroupMetadataValue,
)
from kafkacoord.codecs.models import GroupAdminAction as A
from kafkacoord.codecs.models import GroupCauseKind as K

from .explanations import clock
from .instants import format_instant

__all__ = ["GroupStep", "admin_words", "cause_words", "explain_group"]

NOT_RECORDED: Final = "cause not recorded (written before causes)"
_LISTED_OFFSETS: Final = 5  # a reset of many partitions lists the first few


def _member(c: GroupCause) -> str:
    """``member c2-1 (instance i, client c2, /127.0.0.1)``."""
    about = [
        f"instance {c.group_instance_id}" if c.group_instance_id else "",
        f"client {c.client_id}" if c.client_id else "",
        c.client_host or "",
    ]
    details = ", ".join(a for a in about if a)
    return f"member {c.member_id}" + (f" ({details})" if details else "")


def cause_words(c: GroupCause | None) -> str:
    """The cause as a clause: ``member c2-1 (client c2, /127.0.0.1) left``."""
    if c is None:
        return NOT_RECORDED
    detail = f" ({c.detail})" if c.detail else ""
    if c.kind == K.SUBSCRIBED_TOPIC_CHANGED:
        return f"subscribed topics changed{detail}"
    if c.kind == K.GROUP_MAX_SIZE_EXCEEDED:
        return f"the group is over its maximum size{detail}"
    if c.kind == K.PROTOCOL_UPGRADED:
        return f"the classic group became a consumer group{detail}"
    if c.member_id is None:
        return c.kind.replace("_", " ") + detail
    member = _member(c)
    words = {
        K.MEMBER_JOINED: f"{member} joined",
        K.MEMBER_LEFT: f"{member} left",
        K.MEMBER_EXPIRED: f"{member}'s session expired",
        K.MEMBER_REJOINED: f"{member} rejoined",
        K.SUBSCRIPTION_CHANGED: f"{member}'s subscription changed",
        K.STATIC_MEMBER_REPLACED: f"static {member} restarted",
        K.SYNC_EXPIRED: f"{member} did not sync in time",
        K.MEMBER_REMOVED: f"{member} was removed by an admin",
    }.get(c.kind, f"{c.kind.replace('_', ' ')}: {member}")
    return words + detail


def _who(value: GroupAdminValue, request_id: str) -> str:
    who = value.principal or f"client {value.client_id} (no principal: unauthenticated)"
    return f"{who} (request {request_id})"


def _offset(o: int | None) -> str:
    return "none" if o is None else str(o)


def admin_words(value: GroupAdminValue, request_id: str) -> str:
    """``offsets reset by User:alice (request c:7): orders-0 120 → 0``."""
    who = _who(value, request_id)
    offsets = [f"{o.topic}-{o.partition} {_offset(o.before)} → {_offset(o.after)}"
               for o in value.offsets[:_LISTED_OFFSETS]]  # fmt: skip
    if len(value.offsets) > _LISTED_OFFSETS:
        offsets.append(f"and {len(value.offsets) - _LISTED_OFFSETS} more")
    listed = ", ".join(offsets)
    if value.action == A.OFFSETS_RESET:
        return f"offsets reset by {who}: {listed}"
    if value.action == A.OFFSETS_DELETED:
        return f"offsets deleted by {who}: {listed}"
    if value.action == A.GROUP_DELETED:
        count = len(value.offsets)
        return f"group deleted by {who}" + (f" with {count} committed offset(s)" if count else "")
    return f"{value.action.replace('_', ' ')} by {who}"


@dataclass(frozen=True, slots=True)
class GroupStep:
    """One step of a group's history, explained. ``kind``: ``rebalance`` (a new generation
    or epoch), ``admin`` (an audited admin action) or ``deleted`` (the group's record
    went)."""

    offset: int
    time_ms: int
    kind: str
    protocol: str | None  # "classic" or "consumer"; None for an admin action
    generation: tuple[int | None, int] | None
    members: tuple[int | None, int] | None
    cause: GroupCause | None
    admin: GroupAdminValue | None
    request_id: str | None
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "time_ms": self.time_ms,
            "time": format_instant(self.time_ms),
            "kind": self.kind,
            "protocol": self.protocol,
            "generation": None if self.generation is None else list(self.generation),
            "members": None if self.members is None else list(self.members),
            "cause": None if self.cause is None else self.cause.to_avro(),
            "admin": None if self.admin is None else {
                "action": self.admin.action,
                "principal": self.admin.principal,
                "client_id": self.admin.client_id,
                "request_id": self.request_id,
                "offsets": [o.to_avro() for o in self.admin.offsets],
            },
            "text": self.text,
        }  # fmt: skip


def _change(before: int | None, after: int, what: str) -> str:
    return f"{what} {after}" if before is None else f"{what} {before} → {after}"


def _members(before: int | None, after: int) -> str:
    """``3 → 2 members``, or ``2 members`` when the count stayed or is the first."""
    noun = "member" if after == 1 else "members"
    return f"{after} {noun}" if before in (None, after) else f"{before} → {after} {noun}"


class _Reader:
    """Folds one group's records into steps, keeping what a line compares with."""

    def __init__(self) -> None:
        self.steps: list[GroupStep] = []
        self.generation: int | None = None
        self.member_ids: frozenset[str] | None = None
        self.epoch: int | None = None
        self.consumer_members: set[str] = set()
        self.consumer_count: int | None = None

    def classic(self, offset: int, time_ms: int, value: GroupMetadataValue | None) -> None:
        if value is None:
            self._deleted(offset, time_ms, "classic")
            self.generation, self.member_ids = None, None
            return
        ids = frozenset(m.member_id for m in value.members)
        if value.generation == self.generation and ids == self.member_ids:
            return  # the same generation written again: nothing new to explain
        before = None if self.member_ids is None else len(self.member_ids)
        head = _change(self.generation, value.generation, "generation")
        size = _members(before, len(ids))
        text = f"{clock(time_ms)} {head}, {size}: {cause_words(value.cause)}"
        self.steps.append(GroupStep(offset, time_ms, "rebalance", "classic",
                                    (self.generation, value.generation), (before, len(ids)),
                                    value.cause, None, None, text))  # fmt: skip
        self.generation, self.member_ids = value.generation, ids

    def consumer(self, offset: int, time_ms: int, value: ConsumerGroupMetadataValue | None) -> None:
        if value is None:
            self._deleted(offset, time_ms, "consumer")
            self.epoch, self.consumer_count = None, None
            return
        count = len(self.consumer_members)
        before = self.consumer_count
        head = _change(self.epoch, value.epoch, "epoch")
        size = _members(before, count)
        text = f"{clock(time_ms)} {head}, {size}: {cause_words(value.cause)}"
        self.steps.append(GroupStep(offset, time_ms, "rebalance", "consumer",
                                    (self.epoch, value.epoch), (before, count), value.cause,
                                    None, None, text))  # fmt: skip
        self.epoch, self.consumer_count = value.epoch, count

    def admin(self, offset: int, time_ms: int, key: GroupAdminKey, value: GroupAdminValue) -> None:
        text = f"{clock(time_ms)} {admin_words(value, key.request_id)}"
        self.steps.append(GroupStep(offset, time_ms, "admin", None, None, None, None, value,
                                    key.request_id, text))  # fmt: skip

    def _deleted(self, offset: int, time_ms: int, protocol: str) -> None:
        # Deleted by an admin (its audit step comes first), expired with its last
        # offset, or a classic group upgraded to the consumer protocol.
        text = f"{clock(time_ms)} the {protocol} group's record was removed"
        self.steps.append(GroupStep(offset, time_ms, "deleted", protocol, None, None, None, None,
                                    None, text))  # fmt: skip


def explain_group(
    records: Iterable[tuple[int, int, AvroModel, AvroModel | None]],
) -> list[GroupStep]:
    """``records``: (offset, time, key, value) of one group's records in log order (its
    classic snapshot, consumer epoch and member records, and admin audit records; others
    are passed over). ``None`` values are tombstones."""
    reader = _Reader()
    for offset, time_ms, key, value in records:
        if isinstance(key, GroupMetadataKey):
            classic = value if isinstance(value, GroupMetadataValue) else None
            reader.classic(offset, time_ms, classic)
        elif isinstance(key, ConsumerGroupMetadataKey):
            epoch = value if isinstance(value, ConsumerGroupMetadataValue) else None
            reader.consumer(offset, time_ms, epoch)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if value is None:
                reader.consumer_members.discard(key.member_id)
            else:
                reader.consumer_members.add(key.member_id)
        elif isinstance(key, GroupAdminKey) and isinstance(value, GroupAdminValue):
            reader.admin(offset, time_ms, key, value)
    return reader.steps
