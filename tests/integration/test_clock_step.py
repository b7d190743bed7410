"""A step of a daemon's wall clock fences no member and no node.

The shards once kept their timers on the wall clock: a step forward fired every session
at once (every member of every group on the daemon fenced, and the nodes with them); a
step back held every session back by the step. Found by the fault campaign
(tests/nemesis, its clock-jump faults); here the daemon runs under libfaketime, whose
offset the test moves while members of both protocols heartbeat.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.cimpl import NewTopic

from kafkacoord.client import group_member
from kafkacoord.storage.clients import admin_client
from tests.nemesis.campaign import faketime_env

from .cluster import fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

SHARDS = 2


# The timers under test are the daemon's own, whatever the broker; the fault campaign
# steps the clock on Apache Kafka too.
@pytest.mark.parametrize("bootstrap", ["tansu"], indirect=True)
def test_a_wall_clock_step_either_way_fences_no_member(
    bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    clock = tmp_path / "clock"
    clock.write_text("+0\n")
    env = fast_daemon_env(bootstrap, prefix, SHARDS)
    env.update(faketime_env(clock))
    daemon = start_daemon(env, tmp_path, 1)
    try:
        daemon.wait_for("group shards active", timeout_s=90)
        topic = f"{prefix}work"
        admin = admin_client(bootstrap)
        for future in admin.create_topics([NewTopic(topic, 4, 1)]).values():
            future.result(30)
        lost: list[str] = []
        # The classic member's own session and partition counts (the consumer protocol's
        # session is the group's, and its coordinator assigns).
        classic = {"session_timeout_ms": 10_000, "partition_counts": lambda topics: {topic: 4}}
        members = [
            group_member(
                bootstrap, f"{prefix}{protocol}", [topic], protocol=protocol,
                topic_prefix=prefix, offsets_partitions=SHARDS,
                # Heartbeats sparser than the shards' timer passes (at least every 0.5 s),
                # so a session's deadline, not a heartbeat, comes first after a step.
                heartbeat_interval_ms=3000,
                on_lost=lambda partitions, p=protocol: lost.append(p),  # type: ignore[misc]
                **(classic if protocol == "classic" else {}),
            ).start()
            for protocol in ("classic", "consumer")
        ]  # fmt: skip
        try:
            for member in members:
                assert member.wait_assigned(60), member.group_id
            wait_until(lambda: all(m.assignment for m in members), 60, "assignments")
            epochs = [m.generation for m in members]
            for offset in ("+900s", "+0", "-900s", "+0"):  # 15 minutes ahead, back, behind
                clock.write_text(f"{offset}\n")
                time.sleep(4)  # a heartbeat of each member, and many timer passes
            # On the wall clock the first step expired the node's own session at once.
            expired = [e["event"] for e in daemon.events if "session expired" in e["event"]]
            assert expired == []
            assert lost == []
            assert [m.generation for m in members] == epochs
            assert all(m.assignment for m in members)
        finally:
            for member in members:
                member.close(timeout_s=5)
    finally:
        daemon.stop()
