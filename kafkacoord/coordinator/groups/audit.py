"""Audit records of admin actions on a group (docs/architecture.md#causes): who changed
its offsets or deleted it, written in the batch of the change and tombstoned in that same
batch, so the compacted log keeps nothing of them and the history window keeps both.

Who: the connection's principal (mutual TLS; none without client authentication) and
the request (``client id:correlation id``, which a retry keeps). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkacoord.codecs.models import AdminOffset, GroupAdminKey, GroupAdminValue
from kafkacoord.coordinator.runtime.shard import Record, RequestRef

__all__ = ["admin_records", "is_admin_commit"]


def is_admin_commit(reset: bool, member_id: str, instance_id: str | None) -> bool:
    """A reset: a commit by no member that the reset tools mark as one. A standalone
    consumer's member-less commits are its own progress, not audited."""
    return reset and not member_id and instance_id is None


def admin_records(
    group_id: str, ref: RequestRef, action: str, now: int, offsets: Iterable[AdminOffset] = ()
) -> list[Record]:
    """The audit record of ``action`` by ``ref``'s caller, and its tombstone."""
    key = GroupAdminKey(group_id, f"{ref.client_id}:{ref.correlation_id}")
    value = GroupAdminValue(action, now, ref.client_id, ref.principal, tuple(offsets))
    return [Record(key, value), Record(key, None)]
