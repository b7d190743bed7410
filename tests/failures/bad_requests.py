"""Bad requests: each gets Kafka's exact error code and a clear message, and changes nothing.

One daemon, two service nodes, a topic, and a group with one stable member and
committed offsets. Then: a replication factor above the node count, oversized offset
metadata, an unknown group, unknown members (heartbeat, sync, commit), a stale
generation (heartbeat, commit), a reassignment to unknown nodes, raw garbage on both
request topics, and well-formed envelopes around malformed bodies or an unknown API.
Afterwards the metadata image, the group and its committed offsets are as before, and
the daemon still serves both kinds of requests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkacoord.coordinator.clients import CommitFailedError, GroupMember
from kafkacoord.coordinator.protocol import Empty, ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.transport import RequestError

from .broker import BrokerControl
from .harness import FailureCluster, call_raw, produce_raw, report, wait_until

DAEMON = 100
NODES = (1, 2)
TOPIC = "bad-orders"
PARTITIONS = 2
METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes


@dataclass
class BadRequestFigures:
    bad_requests_rejected: int
    poison_requests_skipped: int
    seconds: float


Outcome = tuple[ErrorCode, str | None]
Expected = tuple[ErrorCode, str]  # the code, and text the message must contain


def _error(fn: Callable[[], Any]) -> Outcome:
    """The error a request was answered with (NONE if it succeeded)."""
    try:
        fn()
    except RequestError as exc:
        return exc.code, exc.message
    return ErrorCode.NONE, None


def run_bad_requests(broker: BrokerControl, root: Path) -> BadRequestFigures:
    started = time.monotonic()
    with FailureCluster(broker, root, offsets_partitions=1) as cluster:
        daemon = cluster.start_daemon(DAEMON)
        cluster.wait_ready([DAEMON])
        for node in NODES:
            cluster.start_node(node)
        wait_until(lambda: set(NODES) <= cluster.image().live_nodes(), what="service nodes live")
        admin = cluster.admin
        admin.create_topic(TOPIC, replica_assignment={0: [1, 2], 1: [2, 1]})
        group = f"{cluster.prefix}bad-group"
        member = GroupMember(
            cluster.bootstrap, group, [TOPIC], topic_prefix=cluster.prefix, offsets_partitions=1,
            session_timeout_ms=6000, heartbeat_interval_ms=500,
            partition_counts=lambda topics: dict.fromkeys(topics, PARTITIONS),
        ).start()  # fmt: skip
        try:
            assert member.wait_assigned(60), "the member never got an assignment"
            member.commit({(TOPIC, 0): 5, (TOPIC, 1): 7})
            groups = cluster.group_admin()
            channel = cluster.group_channel()
            generation, member_id = member.generation, member.member_id

            def state() -> tuple[Any, ...]:
                [described] = groups.describe_groups([group])
                return (
                    cluster.image().snapshot(),
                    (described.state, described.protocol,
                     sorted(m.member_id for m in described.members)),
                    {tp: (p.offset, p.metadata) for tp, p in groups.committed(group).items()},
                    member.generation,
                )  # fmt: skip

            before = state()
            assert before[3] == generation

            def group_call(body: Any, response: type[Any] = Empty) -> Callable[[], Any]:
                return lambda: channel.call(0, body, response)

            def commit(member_id: str, generation: int, metadata: str = "") -> g.OffsetCommit:
                partitions = [g.CommitPartition(partition=0, offset=6, metadata=metadata)]
                return g.OffsetCommit(
                    group_id=group, generation_id=generation, member_id=member_id,
                    topics=[g.CommitTopic(name=TOPIC, partitions=partitions)],
                )  # fmt: skip

            stranger = "member-that-never-joined"
            cases: list[tuple[str, Outcome, Expected]] = [
                (
                    "replication factor above the node count",
                    _error(lambda: admin.create_topic("too-wide", 1, 3)),
                    (ErrorCode.INVALID_REPLICATION_FACTOR,
                     "replication factor 3 is larger than the 2 live service nodes"),
                ),
                (
                    "heartbeat of an unknown group",
                    _error(group_call(g.Heartbeat(group_id=f"{group}-missing", generation_id=1,
                                                  member_id=stranger))),
                    (ErrorCode.UNKNOWN_MEMBER_ID, f"group '{group}-missing' does not exist"),
                ),
                (
                    "heartbeat of an unknown member",
                    _error(group_call(g.Heartbeat(group_id=group, generation_id=generation,
                                                  member_id=stranger))),
                    (ErrorCode.UNKNOWN_MEMBER_ID,
                     f"member '{stranger}' is not a member of group '{group}'"),
                ),
                (
                    "sync of an unknown member",
                    _error(group_call(g.SyncGroup(group_id=group, generation_id=generation,
                                                  member_id=stranger, protocol_type="consumer",
                                                  protocol_name=member.protocol),
                                      g.SyncGroupResponse)),
                    (ErrorCode.UNKNOWN_MEMBER_ID,
                     f"member '{stranger}' is not a member of group '{group}'"),
                ),
                (
                    "commit of an unknown member",
                    _error(group_call(commit(stranger, generation), g.OffsetCommitResponse)),
                    (ErrorCode.UNKNOWN_MEMBER_ID,
                     f"member '{stranger}' is not a member of group '{group}'"),
                ),
                (
                    "heartbeat of a stale generation",
                    _error(group_call(g.Heartbeat(group_id=group, generation_id=generation - 1,
                                                  member_id=member_id))),
                    (ErrorCode.ILLEGAL_GENERATION,
                     f"generation {generation - 1} is not the group's {generation}"),
                ),
                (
                    "commit of a stale generation",
                    _error(group_call(commit(member_id, generation - 1), g.OffsetCommitResponse)),
                    (ErrorCode.ILLEGAL_GENERATION,
                     f"generation {generation - 1} is not the current generation {generation} "
                     f"of group '{group}'"),
                ),
                (
                    "malformed controller request body",
                    _raw(cluster, cluster.topics.controller_requests, "CreateTopic",
                         b'{"name": "x", "num_partitions": "many"'),
                    (ErrorCode.INVALID_REQUEST, "malformed CreateTopic body"),
                ),
                (
                    "malformed group request body",
                    _raw(cluster, cluster.topics.group_requests, "OffsetCommit",
                         b'{"group_id": 42, "topics": {}}'),
                    (ErrorCode.INVALID_REQUEST, "malformed OffsetCommit body"),
                ),
                (
                    "unknown api",
                    _raw(cluster, cluster.topics.group_requests, "Frobnicate", b"{}"),
                    (ErrorCode.INVALID_REQUEST, "unknown api 'Frobnicate'"),
                ),
            ]  # fmt: skip

            # Oversized metadata fails per partition, as Kafka reports it.
            oversized: Outcome
            try:
                member.commit({(TOPIC, 0): (6, "m" * (METADATA_MAX_BYTES + 1))})
                oversized = (ErrorCode.NONE, None)
            except CommitFailedError as exc:
                oversized = (exc.errors[(TOPIC, 0)], str(exc))
            cases.append(
                (
                    "offset metadata over offset.metadata.max.bytes",
                    oversized,
                    (ErrorCode.OFFSET_METADATA_TOO_LARGE, "OFFSET_METADATA_TOO_LARGE"),
                )
            )
            results = admin.alter_reassignments({(TOPIC, 0): [1, 99]})
            cases.append(
                (
                    "reassignment to unknown nodes",
                    (results[0].error, results[0].message) if len(results) == 1
                    else (ErrorCode.NONE, f"{len(results)} results"),
                    (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                     f"cannot reassign {TOPIC}-0 to unknown nodes [99]"),
                )
            )  # fmt: skip

            wrong = [
                f"{name}: got {got[0].name} {got[1]!r}, want {want[0].name} with {want[1]!r}"
                for name, got, want in cases
                if got[0] is not want[0] or want[1] not in (got[1] or "")
            ]
            assert not wrong, "wrong answers to bad requests:\n" + "\n".join(wrong)

            # Garbage where envelopes belong: nobody to answer, so skipped and counted.
            skipped_before = len(cluster.events(DAEMON, "skipped poison request"))
            produce_raw(cluster.bootstrap, cluster.topics.controller_requests, 0, b"\x00junk",
                        b"\xff\xfe not avro")  # fmt: skip
            produce_raw(cluster.bootstrap, cluster.topics.group_requests, 0, None, b"\x07")
            poison = wait_until(
                lambda: (n := len(cluster.events(DAEMON, "skipped poison request"))
                         - skipped_before) >= 2 and n,
                timeout_s=30, what="both garbage requests skipped",
            )  # fmt: skip

            # Nothing changed, and the daemon serves as before.
            assert state() == before
            assert daemon.process.poll() is None
            member.commit({(TOPIC, 0): 8})
            assert {tp: p.offset for tp, p in groups.committed(group).items()} == {
                (TOPIC, 0): 8, (TOPIC, 1): 7}  # fmt: skip
            assert admin.create_topic("after-bad", replica_assignment={0: [1]}).assignment == {
                0: [1]}  # fmt: skip
        finally:
            member.close()
        figures = BadRequestFigures(
            bad_requests_rejected=len(cases) + poison,
            poison_requests_skipped=poison,
            seconds=round(time.monotonic() - started, 1),
        )
    report("bad_requests", broker, figures)
    return figures


def _raw(cluster: FailureCluster, topic: str, api: str, body: bytes) -> Outcome:
    reply = call_raw(cluster.bootstrap, cluster.topics, topic, api=api, body=body)
    return ErrorCode(reply.error_code), reply.error_message
