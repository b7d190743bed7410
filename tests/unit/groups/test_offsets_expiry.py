"""KIP-211 offset expiry: the pure rules, and the shard's periodic expiration."""

from __future__ import annotations

from kafkacoord.codecs.batch_size import MAX_BATCH_BYTES, batch_bytes
from kafkacoord.codecs.models import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.groups.classic_group import ClassicGroup
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.offsets import (
    ExpirationPolicy,
    expiration_policy,
    expired_partitions,
    is_expired,
)
from kafkacoord.coordinator.groups.scheduling import EXPIRATION_TIMER
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import Record

from .groupdriver import SESSION, Driver, commit_body

G = "g"
RETENTION = 100_000
INTERVAL = 10_000
CFG = GroupConfig(offsets_retention_ms=RETENTION, offsets_retention_check_interval_ms=INTERVAL)


# --------------------------------------------------------------------------- pure rules


def test_policy_by_group_kind() -> None:
    assert expiration_policy(None) == ExpirationPolicy()
    assert expiration_policy(ClassicGroup("simple")) == ExpirationPolicy()
    empty = ClassicGroup("e", protocol_type="consumer", state_timestamp_ms=500)
    assert expiration_policy(empty) == ExpirationPolicy(500)
    stable = ClassicGroup("s", state=GroupState.STABLE, protocol_type="consumer")
    assert expiration_policy(stable) is None


def test_is_expired_bases() -> None:
    v = OffsetCommitValue(1, "", commit_timestamp_ms=1_000)
    assert not is_expired(v, 1_000 + RETENTION - 1, RETENTION, ExpirationPolicy())
    assert is_expired(v, 1_000 + RETENTION, RETENTION, ExpirationPolicy())
    # Empty since 5_000: counts from there, or from a later commit.
    assert not is_expired(v, 1_000 + RETENTION, RETENTION, ExpirationPolicy(5_000))
    assert is_expired(v, 5_000 + RETENTION, RETENTION, ExpirationPolicy(5_000))
    late = OffsetCommitValue(1, "", commit_timestamp_ms=9_000)
    assert not is_expired(late, 5_000 + RETENTION, RETENTION, ExpirationPolicy(5_000))
    # An explicit expire timestamp wins; a negative one means "none".
    explicit = OffsetCommitValue(1, "", commit_timestamp_ms=1_000, expire_timestamp_ms=2_000)
    assert is_expired(explicit, 2_000, RETENTION, ExpirationPolicy(5_000))
    none = OffsetCommitValue(1, "", commit_timestamp_ms=1_000, expire_timestamp_ms=-1)
    assert not is_expired(none, 2_000, RETENTION, ExpirationPolicy())


def test_expired_partitions_never_for_groups_with_members() -> None:
    offsets = {("t", 0): OffsetCommitValue(1, "", 0, expire_timestamp_ms=1)}
    assert expired_partitions(offsets, 10**12, RETENTION, None) == []
    assert expired_partitions(offsets, 10**12, RETENTION, ExpirationPolicy()) == [("t", 0)]


# --------------------------------------------------------------------------- shard


def expiration_runs_until(d: Driver, when: int) -> None:
    d.advance_to(when)


def test_expiration_timer_is_periodic() -> None:
    d = Driver(CFG)
    assert d.shard.timer_deadline(EXPIRATION_TIMER) == d.now + INTERVAL
    d.advance(INTERVAL)
    assert d.shard.timer_deadline(EXPIRATION_TIMER) == d.now + INTERVAL


def test_group_with_members_never_expires_offsets() -> None:
    d = Driver(CFG)
    (m,) = d.form_group(G, 1, session=SESSION)
    d.call(commit_body(G, {("t", 0): 1}, member_id=m.member_id, generation=1))
    # Even an explicit expire timestamp does not expire a live group's offsets.
    d.call(
        api.OffsetCommit(
            group_id=G,
            member_id=m.member_id,
            generation_id=1,
            retention_time_ms=1,
            topics=[
                api.CommitTopic(name="t", partitions=[api.CommitPartition(partition=1, offset=1)])
            ],
        )
    )
    for _ in range(3 * RETENTION // 5_000):
        d.advance(5_000)
        hb = api.Heartbeat(group_id=G, generation_id=1, member_id=m.member_id)
        d.call(hb)
    assert d.state(G) is GroupState.STABLE
    assert sorted(d.shard.committed_offsets(G)) == [("t", 0), ("t", 1)]


def test_empty_group_expires_retention_after_it_became_empty_then_group_tombstone() -> None:
    d = Driver(CFG)
    (m,) = d.form_group(G, 1, session=60_000)
    d.call(commit_body(G, {("t", 0): 1, ("t", 1): 2}, member_id=m.member_id, generation=1))
    committed_at = d.now
    d.advance(3 * INTERVAL)  # offsets age while the member is still there
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=m.member_id)]))
    assert d.state(G) is GroupState.EMPTY
    empty_since = d.now
    group = d.shard.group(G)
    assert group is not None and group.state_timestamp_ms == empty_since
    # Past commit + retention, but not empty + retention: kept.
    d.advance_to(committed_at + RETENTION + INTERVAL)
    assert len(d.shard.committed_offsets(G)) == 2
    log_len = len(d.log)
    d.advance_to(empty_since + RETENTION + INTERVAL)
    assert d.shard.committed_offsets(G) == {}
    assert d.shard.group(G) is None
    new = d.log[log_len:]
    assert [(r.key, r.value) for r in new] == [
        (OffsetCommitKey(G, "t", 0), None),
        (OffsetCommitKey(G, "t", 1), None),
        (GroupMetadataKey(G), None),
    ]
    assert d.reload().group_ids() == []


def test_admin_reset_of_long_empty_group_is_kept_a_full_retention() -> None:
    d = Driver(CFG)
    (m,) = d.form_group(G, 1)
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=m.member_id)]))
    empty_since = d.now
    d.advance(RETENTION - 2 * INTERVAL)
    d.call(commit_body(G, {("t", 0): 0}))  # reset while Empty
    reset_at = d.now
    d.advance_to(empty_since + RETENTION + INTERVAL)
    assert ("t", 0) in d.shard.committed_offsets(G)
    d.advance_to(reset_at + RETENTION + INTERVAL)
    assert d.shard.committed_offsets(G) == {}
    assert d.shard.group(G) is None


def test_standalone_offsets_expire_after_last_commit_and_recommit_renews() -> None:
    d = Driver(CFG)
    d.call(commit_body(G, {("t", 0): 1, ("t", 1): 1}))
    first = d.now
    d.advance(RETENTION // 2)
    d.call(commit_body(G, {("t", 1): 2}))
    second = d.now
    d.advance_to(first + RETENTION + INTERVAL)
    assert sorted(d.shard.committed_offsets(G)) == [("t", 1)]
    assert d.shard.group(G) is not None  # an offset remains: no group tombstone
    assert d.log[-1].key == OffsetCommitKey(G, "t", 0)
    d.advance_to(second + RETENTION + INTERVAL)
    assert d.shard.group(G) is None
    assert d.log[-1].key == GroupMetadataKey(G) and d.log[-1].value is None


def test_explicit_expire_timestamp_wins_for_empty_groups() -> None:
    d = Driver(CFG)
    body = api.OffsetCommit(
        group_id=G,
        retention_time_ms=2 * INTERVAL,
        topics=[api.CommitTopic(name="t", partitions=[api.CommitPartition(partition=0, offset=1)])],
    )
    d.call(body)
    d.advance(3 * INTERVAL)
    assert d.shard.committed_offsets(G) == {}


def test_empty_group_without_offsets_gets_tombstone_at_next_run() -> None:
    d = Driver(CFG)
    (m,) = d.form_group(G, 1)
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=m.member_id)]))
    d.advance(INTERVAL)
    assert d.shard.group(G) is None
    assert d.log[-1].key == GroupMetadataKey(G) and d.log[-1].value is None


def test_loaded_empty_group_expires_from_its_state_timestamp() -> None:
    d = Driver(CFG)
    (m,) = d.form_group(G, 1)
    d.call(commit_body(G, {("t", 0): 1}, member_id=m.member_id, generation=1))
    d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(member_id=m.member_id)]))
    empty_since = d.now
    d.advance(RETENTION // 2)
    loaded = d.reload()
    group = loaded.group(G)
    assert group is not None and group.state_timestamp_ms == empty_since
    assert not loaded.fire_timers(empty_since + RETENTION - 1).records
    out = loaded.fire_timers(empty_since + RETENTION + INTERVAL)
    assert [r.key for r in out.records] == [OffsetCommitKey(G, "t", 0), GroupMetadataKey(G)]


def test_an_expiry_larger_than_one_batch_is_written_over_several_runs() -> None:
    """24,000 offsets expire at once: more tombstones than one batch the broker takes. Each
    run writes what fits and the next follows a millisecond later, until all are gone."""
    d = Driver(CFG)
    groups = [f"wide-{i}" for i in range(12)]
    for group in groups:
        d.call(commit_body(group, {("topic-with-a-name", p): p for p in range(2_000)}))
    committed = d.now
    d.advance_to(committed + RETENTION - 1)  # nothing expired yet
    assert all(len(d.shard.committed_offsets(g)) == 2_000 for g in groups)
    runs: list[list[Record]] = []
    while (deadline := d.shard.next_deadline_ms()) is not None and len(runs) < 20:
        if runs and not runs[-1]:
            break  # the periodic run after the last cut one: nothing left
        d.now = max(d.now, deadline)
        runs.append(d.apply(d.shard.fire_timers(d.now)).records)
    written = [r for r in runs if r]
    assert len(written) >= 3
    for records in written:
        assert batch_bytes([r.raw for r in records if r.raw is not None]) <= MAX_BATCH_BYTES
        assert all(r.raw is not None for r in records)
    tombstones = [r for records in written for r in records]
    assert all(r.value is None for r in tombstones)
    offsets = [r.key for r in tombstones if isinstance(r.key, OffsetCommitKey)]
    assert len(offsets) == len(set(offsets)) == 24_000
    assert {r.key for r in tombstones} - set(offsets) == {GroupMetadataKey(g) for g in groups}
    assert all(d.shard.group(g) is None for g in groups)
