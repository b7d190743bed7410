"""The cause a classic group record carries (docs/architecture.md#causes): what started the
rebalance, and the member it was about. Pure: built from what a handler already holds."""

from __future__ import annotations

from kafkacoord.codecs.models import GroupCause

from .member import Member

__all__ = ["member_cause"]


def member_cause(kind: str, member: Member, detail: str | None = None) -> GroupCause:
    """A classic member's cause: its ids and where it connects from."""
    return GroupCause(kind, member_id=member.member_id, group_instance_id=member.group_instance_id,
                      client_id=member.client_id, client_host=member.client_host,
                      detail=detail)  # fmt: skip
