"""KIP-211 offset expiry on a running daemon, end to end.

Old clients' ``retention_time_ms`` gives commits an explicit expiry of a second, and
the expiration timer runs every 300 ms, so the rules show within seconds:

- a standalone group's offsets expire; tombstones are appended for each offset and,
  once the last one goes, for the group itself, and the group is gone after a restart;
- a group with a live member keeps its offsets however old they are;
- once that member leaves, the group is Empty and its offsets expire too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.client import ClassicProtocolMember, GroupAdmin, GroupMember
from kafkacoord.codecs import encode_key
from kafkacoord.codecs.models import GroupMetadataKey, OffsetCommitKey
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until
from .helpers import read_partition

pytestmark = pytest.mark.integration

SHARDS = 1
RETENTION_MS = 1000


class Env:
    def __init__(self, bootstrap: str, prefix: str, root: Path) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.root = root
        self.topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
        ensure_topics(admin_client(bootstrap), self.topics.specs(), replication_factor=1)
        self.env = {
            **fast_daemon_env(bootstrap, prefix, SHARDS),
            "KAFKACOORD_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "300",
            "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        }
        self.daemon: DaemonProcess = start_daemon(self.env, root, 1)
        self.admin = GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS)

    def restart(self) -> None:
        self.daemon.stop()
        self.daemon = start_daemon(self.env, self.root, 1)

    def commit(self, group: str, topic: str, member: GroupMember | None = None) -> None:
        body = g.OffsetCommit(
            group_id=group,
            generation_id=member.generation if member else -1,
            member_id=member.member_id if member else "",
            retention_time_ms=RETENTION_MS,
            topics=[
                g.CommitTopic(
                    name=topic,
                    partitions=[g.CommitPartition(partition=p, offset=10 + p) for p in (0, 1)],
                )
            ],
        )
        reply = self.admin.channel.call(0, body, g.OffsetCommitResponse)
        assert all(p.error is ErrorCode.NONE for t in reply.topics for p in t.partitions)

    def log_keys(self) -> list[tuple[bytes | None, bool]]:
        """(key, is tombstone) of every record in the shard's log."""
        records = read_partition(self.bootstrap, self.topics.offsets, 0)
        return [(key, value is None) for _, key, value in records]

    def close(self) -> None:
        self.admin.close()
        self.daemon.stop()


@pytest.fixture
def env(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[Env]:
    e = Env(bootstrap, prefix, tmp_path)
    try:
        wait_until(lambda: _answers(e), timeout_s=90, what="the group shard serving")
        yield e
    finally:
        e.close()


def _answers(env: Env) -> bool:
    try:
        env.admin.list_groups()
    except Exception:
        return False
    return True


def _listed(env: Env) -> set[str]:
    return {group.group_id for group in env.admin.list_groups()}


def test_offsets_expire_per_kip_211(env: Env, prefix: str) -> None:
    topic = f"{prefix}events"
    admin = AdminClient({"bootstrap.servers": env.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    simple, live = f"{prefix}simple", f"{prefix}live"

    member = ClassicProtocolMember(
        env.bootstrap, live, [topic], topic_prefix=prefix, offsets_partitions=SHARDS,
        session_timeout_ms=6000, heartbeat_interval_ms=500,
    ).start()  # fmt: skip
    try:
        assert member.wait_assigned(60)
        env.commit(simple, topic)
        env.commit(live, topic, member)
        committed_at = time.monotonic()
        assert set(env.admin.committed(simple)) == {(topic, 0), (topic, 1)}

        # The standalone group's offsets and then the group itself go.
        wait_until(lambda: not env.admin.committed(simple), timeout_s=30, what="simple expiry")
        wait_until(lambda: simple not in _listed(env), timeout_s=30, what="simple group gone")
        keys = env.log_keys()
        for partition in (0, 1):
            assert (encode_key(OffsetCommitKey(simple, topic, partition)), True) in keys
        assert (encode_key(GroupMetadataKey(simple)), True) in keys

        # Past its explicit expiry, and after several expiration runs, the live group's
        # offsets stay: a group with members never expires them.
        time.sleep(max(0.0, committed_at + 3 * RETENTION_MS / 1000 - time.monotonic()))
        assert {tp: p.offset for tp, p in env.admin.committed(live).items()} == {
            (topic, 0): 10,
            (topic, 1): 11,
        }
    finally:
        member.close()

    # Empty now: its offsets expire, then the group.
    wait_until(lambda: not env.admin.committed(live), timeout_s=30, what="live group expiry")
    wait_until(lambda: live not in _listed(env), timeout_s=30, what="live group gone")

    # The tombstones are durable: a restarted daemon does not bring anything back.
    env.restart()
    wait_until(lambda: _answers(env), timeout_s=90, what="serving after restart")
    assert not env.admin.committed(simple)
    assert not env.admin.committed(live)
    assert not {simple, live} & _listed(env)
