"""When a committed offset expires (KIP-211, docs/architecture.md#offset-expiry).

- An explicit expire timestamp (old clients) wins.
- Offsets of a group with members never expire.
- Offsets of an empty group expire ``retention`` after the group became empty.
- Offsets with no group (standalone consumers) expire ``retention`` after their
  last commit.

An expired offset is gone from the views at once, before the coordinator
writes its tombstone.
"""

from __future__ import annotations


def expires_at(
    commit_timestamp_ms: int,
    explicit_expire_ms: int | None,
    *,
    group_exists: bool,
    group_members: int,
    group_state_timestamp_ms: int | None,
    retention_ms: int,
) -> int | None:
    """The expiry time in ms, or None while it cannot expire."""
    # Kafka's -1 means "none given".
    if explicit_expire_ms is not None and explicit_expire_ms >= 0:
        return explicit_expire_ms
    if not group_exists:
        return commit_timestamp_ms + retention_ms
    if group_members > 0:
        return None
    base = group_state_timestamp_ms
    if base is None or base < 0:
        base = commit_timestamp_ms
    return base + retention_ms


def is_expired(expiry_ms: int | None, now_ms: int) -> bool:
    return expiry_ms is not None and now_ms >= expiry_ms
