"""Which member speaks which group protocol.

    member = group_member(bootstrap, "billing", ["orders"], protocol="consumer",
                          on_assigned=start_work, on_revoked=stop_work)

The protocol is a setting of the application, so the member is built from its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .classic_member import ClassicProtocolMember
from .consumer_member import ConsumerProtocolMember
from .group_member import GroupMember

__all__ = ["group_member"]

_KINDS: dict[str, type[GroupMember]] = {
    "classic": ClassicProtocolMember,
    "consumer": ConsumerProtocolMember,
}


def group_member(
    bootstrap: str,
    group_id: str,
    topics: Sequence[str],
    *,
    protocol: str = "classic",
    **options: Any,
) -> GroupMember:
    """A member of ``group_id``, not yet started, speaking ``protocol``: ``"classic"``
    (JoinGroup and SyncGroup, the default) or ``"consumer"`` (KIP-848).

    ``options`` are the member's own: :class:`~.classic_member.ClassicProtocolMember` takes
    ``assignors``, ``session_timeout_ms`` and ``partition_counts``,
    :class:`~.consumer_member.ConsumerProtocolMember` ``server_assignor``, ``topic_regex``,
    ``rack_id`` and ``hints``, and both the ones of :class:`~.group_member.GroupMember`.
    """
    kind = _KINDS.get(protocol)
    if kind is None:
        raise ValueError(f"protocol must be 'classic' or 'consumer', not {protocol!r}")
    return kind(bootstrap, group_id, topics, **options)
