"""Bad requests: each gets Kafka's exact error code and a clear message, and changes nothing.

One daemon, two service nodes, a topic, and a group with one stable member and
committed offsets. Then: a replication factor above the node count, oversized offset
metadata, an unknown group, unknown members (heartbeat, sync, commit), a stale
generation (heartbeat, commit), a reassignment to unknown nodes; raw frames to the
daemon's listener around malformed bodies, an unknown api key or an unsupported
version (answered, then the connection is closed); garbage on connections of its own
(random bytes, a frame over max_frame_bytes, a header cut short, a client gone
mid-frame), each closed by the daemon and logged; and a seeded fuzz run of random
frames. Afterwards the metadata image, the group and its committed offsets are as
before, and the daemon still serves both kinds of requests.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkacoord.client import ClassicProtocolMember, CommitFailedError
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.protocol import ALL_APIS, APIS_BY_KEY, Empty, ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    SIZE,
    RequestHeader,
    encode_request,
)

from .broker import BrokerControl
from .harness import (
    FailureCluster,
    RawExchange,
    RawReply,
    call_raw,
    report,
    send_garbage,
    wait_until,
)

DAEMON = 100
NODES = (1, 2)
TOPIC = "bad-orders"
PARTITIONS = 2
METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes
MAX_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES  # socket.request.max.bytes; the daemon's default
UNKNOWN_API_KEY = 999
FUZZ_FRAMES = 200
FUZZ_SEED = 20240917
FUZZ_BUDGET_S = 20.0
GARBAGE = ("random bytes", "oversize frame", "header cut short", "closed mid-frame")
# What the daemon logs as it drops a connection it cannot read frames from.
BAD_FRAME_EVENT = "bad frame; closing connection"
MID_FRAME_EVENT = "connection closed mid-frame"


@dataclass
class BadRequestFigures:
    bad_requests_rejected: int
    bad_frames_closed: int
    """Garbage connections the daemon closed and logged (one per kind of GARBAGE)."""
    fuzz_frames_closed: int
    fuzz_seconds: float
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
        member = ClassicProtocolMember(
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
            endpoint = cluster.endpoint(DAEMON)
            raw_replies: dict[str, RawReply] = {}

            def raw(api: str | int, body: bytes, *, shard: int = 0, version: int = 0) -> Outcome:
                """A raw frame to the listener: its answer, kept to check the connection."""
                correlation_id = 11 + len(raw_replies)
                reply = call_raw(endpoint, api=api, body=body, shard=shard, version=version,
                                 correlation_id=correlation_id)  # fmt: skip
                raw_replies[f"api {api} v{version}"] = reply
                if reply.correlation_id != correlation_id:
                    return reply.error, f"answer to correlation id {reply.correlation_id}"
                return reply.error, reply.message

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
                    raw("CreateTopic", b'{"name": "x", "num_partitions": "many"', shard=-1),
                    (ErrorCode.INVALID_REQUEST, "malformed CreateTopic body"),
                ),
                (
                    "malformed group request body",
                    raw("OffsetCommit", b'{"group_id": 42, "topics": {}}'),
                    (ErrorCode.INVALID_REQUEST, "malformed OffsetCommit body"),
                ),
                (
                    "unknown api",
                    raw(UNKNOWN_API_KEY, b"{}"),
                    (ErrorCode.INVALID_REQUEST, f"unknown api key {UNKNOWN_API_KEY}"),
                ),
                (
                    "unsupported api version",
                    raw("Heartbeat",
                        g.Heartbeat(group_id=group, generation_id=generation,
                                    member_id=member_id).model_dump_json().encode(),
                        version=99),
                    (ErrorCode.UNSUPPORTED_VERSION, "Heartbeat v99 is not supported"),
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

            # Answered with the error, and then the connection was closed.
            left_open = [name for name, reply in raw_replies.items() if not reply.closed]
            assert not left_open, f"connections left open after a bad request: {left_open}"

            # Garbage on connections of its own: each is closed (answered where the header
            # could be read) and logged, and nobody else notices.
            garbage = _send_garbage(endpoint)
            wrong_garbage = [f"{name}: {problem}" for name, exchange in garbage.items()
                             if (problem := _garbage_problem(name, exchange))]  # fmt: skip
            assert not wrong_garbage, "garbage not handled:\n" + "\n".join(wrong_garbage)
            logged = wait_until(
                lambda: (found := _closing_events(cluster, garbage))
                and len(found) == len(GARBAGE) and found,
                timeout_s=30, what="every garbage connection's closing logged",
            )  # fmt: skip
            reasons = {name: e.get("reason", e["event"]) for name, e in logged.items()}
            assert reasons["oversize frame"] == "oversize frame", reasons
            assert reasons["header cut short"] == "undecodable header", reasons
            assert reasons["closed mid-frame"] == MID_FRAME_EVENT, reasons
            closed = sum(garbage[name].closed for name in logged)

            fuzzed, fuzz_seconds = _fuzz(endpoint, random.Random(FUZZ_SEED))
            assert fuzz_seconds < FUZZ_BUDGET_S, f"{FUZZ_FRAMES} fuzz frames took {fuzz_seconds}s"

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
            bad_requests_rejected=len(cases) + closed,
            bad_frames_closed=closed,
            fuzz_frames_closed=fuzzed,
            fuzz_seconds=round(fuzz_seconds, 1),
            seconds=round(time.monotonic() - started, 1),
        )
    report("bad_requests", broker, figures)
    return figures


def _header(api: str | int, correlation_id: int, *, version: int = 0, shard: int = 0,
            client_id: str = "bad-frames") -> RequestHeader:  # fmt: skip
    key = ALL_APIS[api].key if isinstance(api, str) else api
    return RequestHeader(key, version, correlation_id, shard, client_id)


def _send_garbage(endpoint: str) -> dict[str, RawExchange]:
    """One connection per kind of GARBAGE; what the daemon made of each."""
    rng = random.Random(FUZZ_SEED)
    # A well-formed request header behind a size the daemon must not read that far.
    oversize = encode_request(_header("CreateTopic", 77, shard=-1), b"{}")[SIZE.size :]
    request = encode_request(_header("OffsetCommit", 78), b'{"group_id": "g"}')
    sent = {
        "random bytes": (rng.randbytes(512), False),
        "oversize frame": (SIZE.pack(MAX_FRAME_BYTES + 1) + oversize, False),
        # A whole frame of 6 bytes: too short for the 14-byte request header.
        "header cut short": (SIZE.pack(6) + request[SIZE.size : SIZE.size + 6], False),
        # 20 bytes of a longer frame, then the client stops writing.
        "closed mid-frame": (request[: SIZE.size + 20], True),
    }
    assert tuple(sent) == GARBAGE
    return {name: send_garbage(endpoint, data, half_close=half)
            for name, (data, half) in sent.items()}  # fmt: skip


def _garbage_problem(name: str, exchange: RawExchange) -> str | None:
    """What is wrong with the daemon's handling of one garbage connection, if anything."""
    if not exchange.closed:
        return "the daemon left the connection open"
    answers = [(r.correlation_id, r.error_code, r.message) for r in exchange.replies]
    if name == "oversize frame":
        message = f"frame of {MAX_FRAME_BYTES + 1} bytes exceeds max_frame_bytes={MAX_FRAME_BYTES}"
        want = (77, int(ErrorCode.INVALID_REQUEST), message)
        return None if answers == [want] else f"answered {answers}, want [{want}]"
    if name in ("header cut short", "closed mid-frame"):
        # No header to read a correlation id from: nothing to answer.
        return None if not answers else f"answered {answers}"
    # Random bytes: at most an INVALID_REQUEST, if they happened to look like a header.
    wrong = [a for a in answers if a[1] != ErrorCode.INVALID_REQUEST]
    return f"answered {wrong}" if wrong or len(answers) > 1 else None


def _closing_events(
    cluster: FailureCluster, garbage: dict[str, RawExchange]
) -> dict[str, dict[str, Any]]:
    """The daemon's log line on closing each garbage connection, found by its peer."""
    events = [*cluster.events(DAEMON, BAD_FRAME_EVENT), *cluster.events(DAEMON, MID_FRAME_EVENT)]
    found: dict[str, dict[str, Any]] = {}
    for name, exchange in garbage.items():
        mine = [e for e in events if e.get("peer") == exchange.peer]
        if mine:
            # A connection dropped for a bad frame may also be logged as lost mid-frame.
            found[name] = next((e for e in mine if e["event"] == BAD_FRAME_EVENT), mine[0])
    return found


def _fuzz_frame(rng: random.Random, correlation_id: int) -> tuple[bytes, ErrorCode | None, str]:
    """A random frame the daemon cannot serve, and the error it must answer (None: the
    header cannot be read, so no answer) or a word of the answer's message."""
    api = rng.choice(sorted(ALL_APIS))
    kind = rng.randrange(5)
    if kind == 0:  # a known api around a body that cannot parse
        if rng.random() < 0.5:
            body = bytearray(rng.randbytes(rng.randrange(1, 200)))
            if body[0] in b"{ \t\r\n":
                body[0] = ord("#")  # never a JSON object
        else:
            text = "".join(rng.choice('{}[]":,0123456789abcxyz ') for _ in range(40))
            body = bytearray(b'{"group_id": "' + text.encode())  # an unterminated string
        header = _header(api, correlation_id, shard=rng.randrange(-1, 2), client_id="fuzz")
        return encode_request(header, bytes(body)), ErrorCode.INVALID_REQUEST, "malformed"
    if kind == 1:  # a known api at a version nobody serves
        version = rng.choice([-1, ALL_APIS[api].max_version + 1, rng.randrange(2, 32768)])
        header = _header(api, correlation_id, version=version, client_id="fuzz")
        return encode_request(header, b"{}"), ErrorCode.UNSUPPORTED_VERSION, "not supported"
    if kind == 2:  # an api key nobody serves
        key = rng.randrange(-32768, 32768)
        while key in APIS_BY_KEY:
            key = rng.randrange(-32768, 32768)
        header = _header(key, correlation_id, client_id="fuzz")
        return encode_request(header, b"{}"), ErrorCode.INVALID_REQUEST, "unknown api key"
    if kind == 3:  # a header shorter than a header
        payload = encode_request(_header(api, correlation_id), b"{}")[SIZE.size :]
        payload = payload[: rng.randrange(0, 14)]
        return SIZE.pack(len(payload)) + payload, None, ""
    # A client id length past the end of the frame.
    payload = bytearray(encode_request(_header(api, correlation_id), b"")[SIZE.size :])
    payload[12:14] = rng.randrange(len(payload), 32768).to_bytes(2, "big")
    return SIZE.pack(len(payload)) + bytes(payload), None, ""


def _fuzz(endpoint: str, rng: random.Random) -> tuple[int, float]:
    """FUZZ_FRAMES random frames, each on its own connection: every one is answered as
    expected (or not at all when its header is unreadable) and its connection closed."""
    started = time.monotonic()
    problems: list[str] = []
    closed = 0
    for i in range(FUZZ_FRAMES):
        correlation_id = 1000 + i
        data, code, words = _fuzz_frame(rng, correlation_id)
        exchange = send_garbage(endpoint, data)
        closed += exchange.closed
        answers = [(r.correlation_id, r.error_code, r.message) for r in exchange.replies]
        if not exchange.closed:
            problems.append(f"frame {i} ({data[:40]!r}): connection left open")
        elif code is None and answers:
            problems.append(f"frame {i} ({data[:40]!r}): unreadable header answered {answers}")
        elif code is not None and not (
            len(answers) == 1
            and answers[0][:2] == (correlation_id, int(code))
            and words in (answers[0][2] or "")
        ):
            problems.append(f"frame {i} ({data[:40]!r}): answered {answers}, want {code.name}")
    assert not problems, f"{len(problems)} of {FUZZ_FRAMES} fuzz frames mishandled:\n" + (
        "\n".join(problems[:20])
    )
    return closed, time.monotonic() - started
