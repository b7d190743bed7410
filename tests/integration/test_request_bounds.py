"""Requests beyond their bounds, sent to a live daemon on each broker.

A standalone OffsetCommit with a leader epoch of 2**31 (or an offset or retention of
2**63, or a leader epoch of -2**40) used to be taken by its group shard and fail only
when the record was encoded, taking the shard offline. Now the daemon's edge refuses
it before any state changes: the commit is answered within a second, its connection
serves on, and the next commit on the shard is durable and readable at once.

The fuzz then sends every request type with drawn bodies (extreme integers, odd and
long strings, huge lists and maps, junk of other types), unknown APIs and versions,
random bytes, frames cut short or over max_frame_bytes. Each gets what the daemon's
edge, run in this process, says it must (``bounds_fuzz.expected``), on a connection
that stays open unless the frame could not be parsed; after each, a canary commit and
fetch on the same shard, and a controller call, succeed.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from prometheus_client.parser import text_string_to_metric_families

from kafkacoord.client.base import GroupChannel
from kafkacoord.client.errors import RequestError
from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.apis import encode_body
from kafkacoord.wire.frames import RequestHeader, ResponseFrame, encode_request
from tests.failures.harness import FailureCluster, groups_on_shard, read_log
from tests.rawwire import connect, read_response

from .bounds_fuzz import Case, cases, expected

pytestmark = pytest.mark.integration

# A node id the fuzz's integers are unlikely to name (bounds_fuzz keeps it off anyway).
DAEMON = 31_337
PARTITIONS = 3
ANSWER_WITHIN_S = 1.0
FUZZ_EXAMPLES = 1500
FUZZ_BUDGET_S = 45.0
# A request a shard parks (a join waiting for its group) is not answered at once.
PARKED_AFTER_S = 2.0
CANARY_TIMEOUT_S = 15.0


@dataclass
class SharedBroker:
    """The session's broker (the ``bootstrap`` fixture) as FailureCluster wants it."""

    bootstrap: str
    kind: str = "shared"
    loses_data_on_restart: bool = False

    def restart(self) -> None:
        raise NotImplementedError("the session's broker is shared")


@dataclass
class Live:
    cluster: FailureCluster
    endpoint: str
    metrics_url: str
    channel: GroupChannel
    canaries: dict[int, str]
    """A group of each shard that only the canaries use."""
    commits: int = 0

    def canary(self, shard: int) -> None:
        """A commit to ``shard`` is acknowledged, and a fetch returns it at once."""
        self.commits += 1
        group, offset = self.canaries[shard], self.commits
        part = g.CommitPartition(partition=0, offset=offset)
        body = g.OffsetCommit(
            group_id=group, topics=[g.CommitTopic(name="canary", partitions=[part])]
        )
        reply = self.channel.call(shard, body, g.OffsetCommitResponse, timeout_s=CANARY_TIMEOUT_S)
        assert [p.error for t in reply.topics for p in t.partitions] == [ErrorCode.NONE]
        fetch = g.OffsetFetch(group_id=group, topics=[g.FetchTopic(name="canary", partitions=[0])])
        fetched = self.channel.call(shard, fetch, g.OffsetFetchResponse, timeout_s=CANARY_TIMEOUT_S)
        assert [p.offset for t in fetched.topics for p in t.partitions] == [offset]

    def controller_canary(self) -> None:
        self.commits += 1
        created = self.cluster.admin.create_topic(
            f"canary-{self.commits}", replica_assignment={0: [DAEMON]}, validate_only=True
        )
        assert created.assignment == {0: [DAEMON]}

    def metric_total(self, name: str) -> float:
        """``name`` summed over every label."""
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        )

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return 0.0


@pytest.fixture(scope="module")
def live(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("bounds")
    # Joins are answered at once rather than after group.initial.rebalance.delay.ms.
    env = {"KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
    with FailureCluster(SharedBroker(bootstrap), root, offsets_partitions=PARTITIONS,
                        extra_env=env) as cluster:  # fmt: skip
        daemon = cluster.start_daemon(DAEMON)
        cluster.wait_ready([DAEMON])
        metrics = daemon.wait_for("metrics and health endpoint listening")["url"]
        canaries = {s: groups_on_shard("canary-", s, PARTITIONS)[0] for s in range(PARTITIONS)}
        # Ready is not loaded: the shards may still load once the controller places them.
        # Every shard answers before a test measures how it serves on.
        warm_up = cluster.group_channel(timeout_s=90)
        for shard, group in canaries.items():
            warm_up.call(shard, g.OffsetFetch(group_id=group), g.OffsetFetchResponse)
        yield Live(cluster, cluster.endpoint(DAEMON), str(metrics),
                   cluster.group_channel(timeout_s=CANARY_TIMEOUT_S), canaries)  # fmt: skip
        assert cluster.alive(DAEMON), cluster.log_tail(DAEMON)


class Raw:
    """One connection to the daemon's listener, below every kafkacoord client."""

    def __init__(self, endpoint: str) -> None:
        self.sock = connect(endpoint)
        # Hosts remember replies by (client id, correlation id) to answer a retry without
        # acting twice: every connection here is a client of its own.
        self.client_id = f"bounds-{uuid.uuid4().hex[:12]}"

    def send(self, data: bytes) -> bool:
        """False if the daemon closed the connection while we wrote."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def request(self, api: str, body: bytes, shard: int, correlation_id: int) -> None:
        header = RequestHeader(ALL_APIS[api].key, 0, correlation_id, shard, self.client_id)
        assert self.send(encode_request(header, body))

    def read(self, timeout_s: float) -> ResponseFrame | None:
        """The next answer; None if none came in time. ConnectionError once closed."""
        self.sock.settimeout(timeout_s)
        try:
            return read_response(self.sock)
        except TimeoutError:
            return None
        except ConnectionResetError as exc:
            raise ConnectionError("reset") from exc

    def closed(self, timeout_s: float = 5.0) -> bool:
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _commit(group: str, partition: dict[str, Any], **fields: Any) -> bytes:
    part = {"partition": 0, "offset": 1, **partition}
    return json.dumps(
        {"group_id": group, "topics": [{"name": "orders", "partitions": [part]}], **fields}
    ).encode()


MALFORMED_COMMITS = {
    "leader_epoch=2**31": ({"leader_epoch": 2**31}, {}, "topics[0].partitions[0].leader_epoch"),
    "offset=2**63": ({"offset": 2**63}, {}, "topics[0].partitions[0].offset"),
    "retention_time_ms=2**63": ({}, {"retention_time_ms": 2**63}, "retention_time_ms"),
    "leader_epoch=-2**40": ({"leader_epoch": -(2**40)}, {},
                            "topics[0].partitions[0].leader_epoch"),
}  # fmt: skip


@pytest.mark.parametrize("case", MALFORMED_COMMITS)
def test_an_out_of_range_commit_is_refused_and_its_shard_serves_on(live: Live, case: str) -> None:
    partition, fields, field = MALFORMED_COMMITS[case]
    index = list(MALFORMED_COMMITS).index(case)
    shard = index % PARTITIONS
    group = groups_on_shard(f"standalone-{index}-", shard, PARTITIONS)[0]
    raw = Raw(live.endpoint)
    try:
        started = time.monotonic()
        raw.request("OffsetCommit", _commit(group, partition, **fields), shard, 1)
        answer = raw.read(ANSWER_WITHIN_S)
        took = time.monotonic() - started
        assert answer is not None, f"no answer within {ANSWER_WITHIN_S}s"
        assert (answer.correlation_id, answer.error_code) == (1, ErrorCode.INVALID_REQUEST)
        assert (answer.message or "").startswith(f"OffsetCommit {field}: "), answer.message

        # The same connection, the same group: the next commit is durable (it is
        # answered only once the broker and the cache have it) and readable at once.
        raw.request("OffsetCommit", _commit(group, {"offset": 42, "leader_epoch": 2**31 - 1}),
                    shard, 2)  # fmt: skip
        committed = raw.read(ANSWER_WITHIN_S)
        assert committed is not None and committed.error_code == ErrorCode.NONE, committed
        reply = g.OffsetCommitResponse.model_validate_json(committed.body)
        assert [p.error for t in reply.topics for p in t.partitions] == [ErrorCode.NONE]
        raw.request("OffsetFetch", encode_body(g.OffsetFetch(group_id=group)), shard, 3)
        fetched = raw.read(ANSWER_WITHIN_S)
        assert fetched is not None and fetched.error_code == ErrorCode.NONE, fetched
        offsets = g.OffsetFetchResponse.model_validate_json(fetched.body)
        assert [(t.name, p.partition, p.offset, p.leader_epoch)
                for t in offsets.topics for p in t.partitions] == [
            ("orders", 0, 42, 2**31 - 1)]  # fmt: skip
    finally:
        raw.close()
    assert took < ANSWER_WITHIN_S
    # Another connection (the kafkacoord client) reads it too.
    assert (
        live.channel.call(shard, g.OffsetFetch(group_id=group), g.OffsetFetchResponse)
        .topics[0]
        .partitions[0]
        .offset
        == 42
    )
    # The refused commit wrote nothing: the group's only record on the log is the good one.
    records = [
        decoded
        for _, key, value in read_log(live.cluster.bootstrap, live.cluster.topics.offsets, shard)
        if key is not None and (decoded := _decoded(key, value)) is not None
        and decoded[0].group == group
    ]  # fmt: skip
    assert [(k.topic, v.offset) for k, v in records] == [("orders", 42)]
    assert live.metric("kafkacoord_requests_refused_total", api="OffsetCommit",
                       reason="out_of_range") >= 1  # fmt: skip
    assert live.cluster.alive(DAEMON)


def _wide_commit(group: str, partitions: int) -> g.OffsetCommit:
    parts = [g.CommitPartition(partition=p, offset=p) for p in range(partitions)]
    return g.OffsetCommit(group_id=group, topics=[g.CommitTopic(name="wide", partitions=parts)])


def test_a_commit_too_large_for_one_batch_is_refused_and_its_shard_serves_on(
    live: Live,
) -> None:
    """20,000 partitions in one commit: about 1.3 MB of records, more than the broker takes
    in one batch. It used to reach the broker, fail the shard's append and reload the
    shard, and its client retried the NOT_COORDINATOR it got until its timeout."""
    shard = 0
    group = groups_on_shard("wide-", shard, PARTITIONS)[0]
    restarts = live.metric_total("kafkacoord_shard_restarts_total")
    started = time.monotonic()
    with pytest.raises(RequestError) as refused:
        live.channel.call(shard, _wide_commit(group, 20_000), g.OffsetCommitResponse)
    took = time.monotonic() - started
    assert refused.value.code is ErrorCode.INVALID_COMMIT_OFFSET_SIZE, refused.value
    assert "send fewer partitions" in (refused.value.message or "")
    assert took < 5.0  # answered once, not retried
    fetched = live.channel.call(
        shard,
        g.OffsetFetch(group_id=group, topics=[g.FetchTopic(name="wide", partitions=[0])]),
        g.OffsetFetchResponse,
    )
    assert [p.offset for t in fetched.topics for p in t.partitions] == [-1]  # nothing kept
    live.canary(shard)
    assert live.metric_total("kafkacoord_shard_restarts_total") == restarts


def test_commits_that_fit_one_batch_each_but_not_together_are_all_taken(live: Live) -> None:
    """Three commits of 7,000 partitions, sent together on one connection: each fits one
    batch, all three do not. Each is appended in a batch the broker takes."""
    shard = 1
    groups = groups_on_shard("wide-together-", shard, PARTITIONS, count=3)
    restarts = live.metric_total("kafkacoord_shard_restarts_total")
    raw = Raw(live.endpoint)
    try:
        frames = b"".join(
            encode_request(
                RequestHeader(ALL_APIS["OffsetCommit"].key, 0, i, shard, raw.client_id),
                encode_body(_wide_commit(group, 7_000)),
            )
            for i, group in enumerate(groups)
        )
        assert raw.send(frames)
        answers = [raw.read(CANARY_TIMEOUT_S) for _ in groups]
    finally:
        raw.close()
    assert [(a.correlation_id, a.error_code) for a in answers if a is not None] == [
        (i, ErrorCode.NONE) for i in range(len(groups))
    ]
    for group in groups:
        fetched = live.channel.call(shard, g.OffsetFetch(group_id=group), g.OffsetFetchResponse)
        assert sorted(p.offset for t in fetched.topics for p in t.partitions) == list(range(7_000))
    live.canary(shard)
    assert live.metric_total("kafkacoord_shard_restarts_total") == restarts


def _decoded(key: bytes, value: bytes | None) -> tuple[OffsetCommitKey, OffsetCommitValue] | None:
    try:
        k, v = decode_record(key, value)
    except CodecError:
        return None
    if isinstance(k, OffsetCommitKey) and isinstance(v, OffsetCommitValue):
        return k, v
    return None


def _send(live: Live, case: Case) -> str:
    """Send one case on a connection of its own; check what came back against the
    edge's verdict; return what happened, for the tally."""
    want = expected(case, PARTITIONS)
    raw = Raw(live.endpoint)
    data = case.data
    if case.kind == "api":
        assert case.header is not None
        data = encode_request(case.header._replace(client_id=raw.client_id), case.body)
    try:
        sent = raw.send(data)
        if want is None:  # cut short: the client goes away mid-frame
            return "cut short"
        try:
            answer = raw.read(PARKED_AFTER_S if want.code is None else CANARY_TIMEOUT_S)
        except ConnectionError:
            answer = None
            assert not sent or want.closes, f"closed without an answer, want {want}"
            return "closed"
        if want.code is None:  # handed to a shard: any answer, or parked
            if answer is None:
                return "parked"
            assert case.header is not None and answer.correlation_id == case.header.correlation_id
            # It did reach a shard, and the connection serves on.
            assert answer.error_code != ErrorCode.UNKNOWN_SERVER_ERROR, answer.message
            return f"served {ErrorCode(answer.error_code).name}"
        assert answer is not None, f"no answer, want {want}"
        assert ErrorCode(answer.error_code) is want.code, (answer, want)
        assert want.message in (answer.message or ""), (answer, want)
        if want.closes:
            assert raw.closed(), f"the connection stayed open after {want}"
            return f"{want.code.name}, closed"
        # Refused alone: the same connection serves the next request.
        raw.request("ListGroups", b"{}", 0, 8)
        probe = raw.read(CANARY_TIMEOUT_S)
        assert probe is not None and probe.correlation_id == 8, probe
        assert probe.error_code == ErrorCode.NONE, probe
        return f"{want.code.name}, open"
    finally:
        raw.close()


def test_fuzzed_requests_leave_the_daemon_serving(live: Live) -> None:
    deadline = time.monotonic() + FUZZ_BUDGET_S
    tally: Counter[str] = Counter()

    @settings(
        max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
        # Against a live daemon a failure is printed as found: shrinking it would replay
        # frames for minutes.
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=cases(PARTITIONS, DAEMON))
    def one(case: Case) -> None:
        if time.monotonic() > deadline:
            tally["not sent: time budget spent"] += 1
            return
        outcome = _send(live, case)
        tally[f"{case.kind}: {outcome}"] += 1
        try:
            live.canary(case.shard)
            live.controller_canary()
        except RequestError as exc:
            raise AssertionError(f"canary failed after {case!r}: {exc}") from exc
        assert live.cluster.alive(DAEMON), live.cluster.log_tail(DAEMON)

    try:
        one()
    finally:
        print(json.dumps(dict(sorted(tally.items())), indent=1))
    sent = sum(n for k, n in tally.items() if not k.startswith("not sent"))
    assert sent >= 100, tally
    # Each kind of refusal was exercised, and requests did reach the shards.
    seen = " ".join(tally)
    for words in ("INVALID_REQUEST, open", "INVALID_REQUEST, closed", "NOT_COORDINATOR, open",
                  "served", "unknown api", "cut short", "binary"):  # fmt: skip
        assert words in seen, tally
    assert live.metric("kafkacoord_requests_refused_total", api="unknown",
                       reason="unknown_api") >= 1  # fmt: skip


def test_the_daemon_kept_every_shard(live: Live) -> None:
    """Runs last in this module: nothing the fuzz sent took a shard away or offline."""
    for shard in range(PARTITIONS):
        live.canary(shard)
    assert live.metric("kafkacoord_shards", state="ACTIVE") == PARTITIONS + 1  # + controller
    failures = live.cluster.events(DAEMON, "dispatch failed")
    assert not failures, failures
