"""A tiny stand-in for the runtime: drives a GroupShard by hand with a fake clock.

It does what the runtime does: calls ``handle`` / ``fire_timers``, replays every returned
record at once, keeps the records as "the log" (durable at once: the post-commit actions
run right away), and collects the replies. ``reload`` builds a
fresh shard from the log (through the real Avro codec) the way a new leader would.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkacoord.codecs import decode_record, encode_record
from kafkacoord.coordinator.groups.assignors import get_assignor
from kafkacoord.coordinator.groups.classic_group import GroupSnapshot
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.shard import (
    Record,
    Reply,
    ReplyChannel,
    Request,
    RequestRef,
    Result,
    replay_result,
)

T0 = 1_700_000_000_000
SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000


def sub(*topics: str, owned: Sequence[tuple[str, int]] = (), generation: int = -1) -> bytes:
    return encode_subscription(Subscription(tuple(topics), None, tuple(owned), generation))


def protocols(*names: str, topics: Sequence[str] = ("t",)) -> list[api.JoinProtocol]:
    return [api.JoinProtocol(name=n, metadata=sub(*topics)) for n in names or ("range",)]


def join_body(
    group: str,
    member_id: str = "",
    *,
    names: Sequence[str] = ("range",),
    topics: Sequence[str] = ("t",),
    protos: Sequence[api.JoinProtocol] | None = None,
    session: int = SESSION,
    rebalance: int = REBALANCE,
    instance: str | None = None,
    client_id: str = "client",
    protocol_type: str = "consumer",
) -> api.JoinGroup:
    return api.JoinGroup(
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=list(protos) if protos is not None else protocols(*names, topics=topics),
        client_id=client_id,
        client_host="/127.0.0.1",
    )


def commit_body(
    group: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    member_id: str = "",
    generation: int = -1,
    instance: str | None = None,
    metadata: str | None = "",
    retention_time_ms: int = -1,
    reset: bool = False,
) -> api.OffsetCommit:
    by_topic: dict[str, list[api.CommitPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            api.CommitPartition(partition=partition, offset=offset, metadata=metadata)
        )
    return api.OffsetCommit(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        retention_time_ms=retention_time_ms,
        reset=reset,
        topics=[api.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def partition_errors(reply: Reply) -> dict[tuple[str, int], ErrorCode]:
    body = reply.body
    assert isinstance(body, api.OffsetCommitResponse | api.OffsetDeleteResponse)
    return {(t.name, p.partition): p.error for t in body.topics for p in t.partitions}


def roundtrip(record: Record) -> Record:
    key, value = decode_record(*encode_record(record.key, record.value))
    return Record(key, value)


@dataclass
class Member:
    """What a client knows about its membership."""

    member_id: str
    generation: int = -1
    leader: str = ""
    instance: str | None = None
    assignment: list[tuple[str, int]] = field(default_factory=list)


class Driver:
    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        now: int = T0,
        partition: int = 0,
        load: bool = True,
    ) -> None:
        self.config = config or GroupConfig()
        self.partition = partition
        self.now = now
        self._ids = itertools.count(1)
        self._corr = itertools.count(1)
        self.shard = GroupShard(self.config, partition, member_id_factory=self._member_id)
        self.log: list[Record] = []
        self.replies: list[Reply] = []
        if load:
            self.apply(self.shard.on_loaded(now))

    def _member_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    # -- the runtime's part ----------------------------------------------------

    def apply(self, result: Result) -> Result:
        """The runtime's part: replay, append (to ``log``), then the post-commit actions and
        the replies."""
        replay_result(self.shard, result)
        self.log.extend(result.records)
        result.replies = result.committed()
        result.actions = []
        self.replies.extend(result.replies)
        return result

    def request(
        self, body: Body, *, client_id: str = "client", channel: ReplyChannel | None = None
    ) -> RequestRef:
        ref = RequestRef(client_id, next(self._corr), channel)
        req = Request(ref, type(body).__name__, body)
        self.apply(self.shard.handle(req, self.now))
        return ref

    def reply(self, ref: RequestRef) -> Reply | None:
        found = [r for r in self.replies if r.to == ref]
        assert len(found) <= 1, f"{len(found)} replies to one request: {found}"
        return found[0] if found else None

    def call(
        self, body: Body, *, client_id: str = "client", channel: ReplyChannel | None = None
    ) -> Reply:
        ref = self.request(body, client_id=client_id, channel=channel)
        reply = self.reply(ref)
        assert reply is not None, f"{type(body).__name__} was parked"
        return reply

    def advance(self, ms: int) -> Result:
        """Move the clock forward, firing each timer at its own deadline as the runtime does."""
        target = self.now + ms
        fired = Result()
        while (deadline := self.shard.next_deadline_ms()) is not None and deadline <= target:
            self.now = max(self.now, deadline)
            fired.extend(self.apply(self.shard.fire_timers(self.now)))
        self.now = target
        return fired

    def advance_to(self, deadline: int) -> Result:
        return self.advance(max(0, deadline - self.now))

    def reload(self, records: Iterable[Record] | None = None) -> GroupShard:
        """A fresh shard loaded from ``records`` (default: the whole log)."""
        fresh = GroupShard(self.config, self.partition)
        for record in self.log if records is None else records:
            fresh.replay(roundtrip(record))
        fresh.on_loaded(self.now)
        return fresh

    def folded(self) -> list[Record]:
        """The log after compaction: the last record per key, tombstones dropped."""
        last: dict[object, Record] = {}
        for record in self.log:
            last[record.key] = record
        return [r for r in last.values() if r.value is not None]

    # -- views -------------------------------------------------------------------

    def state(self, group: str) -> GroupState | None:
        g = self.shard.group(group)
        return None if g is None else g.state

    def snapshot(self, group: str) -> GroupSnapshot:
        snap = self.shard.describe_group(group)
        assert snap is not None
        return snap

    # -- client flows ------------------------------------------------------------

    def new_member_id(self, group: str, **kw: object) -> str:
        """First JoinGroup of a dynamic member: MEMBER_ID_REQUIRED with its id."""
        reply = self.call(join_body(group, **kw))  # type: ignore[arg-type]  # test helper
        assert reply.error is ErrorCode.MEMBER_ID_REQUIRED, reply
        assert isinstance(reply.body, api.JoinGroupResponse)
        return reply.body.member_id

    def join_response(self, ref: RequestRef) -> api.JoinGroupResponse:
        reply = self.reply(ref)
        assert reply is not None, "JoinGroup still parked"
        assert reply.error is ErrorCode.NONE, reply
        assert isinstance(reply.body, api.JoinGroupResponse)
        return reply.body

    def sync_response(self, ref: RequestRef) -> api.SyncGroupResponse:
        reply = self.reply(ref)
        assert reply is not None, "SyncGroup still parked"
        assert reply.error is ErrorCode.NONE, reply
        assert isinstance(reply.body, api.SyncGroupResponse)
        return reply.body

    def form_group(
        self,
        group: str,
        n: int,
        *,
        partitions: Mapping[str, int] | None = None,
        assignor: str = "range",
        topics: Sequence[str] = ("t",),
        instances: Sequence[str | None] | None = None,
        session: int = SESSION,
        rebalance: int = REBALANCE,
    ) -> list[Member]:
        """n members join an Empty group and reach Stable with ``assignor``'s assignment."""
        inst = list(instances) if instances is not None else [None] * n
        ids: list[tuple[str, str | None]] = []
        for i in range(n):
            if inst[i] is None:
                mid = self.new_member_id(
                    group, names=(assignor,), topics=topics, session=session, rebalance=rebalance
                )
                ids.append((mid, None))
            else:
                ids.append(("", inst[i]))
        refs = []
        for member_id, instance in ids:
            body = join_body(
                group,
                member_id,
                names=(assignor,),
                topics=topics,
                instance=instance,
                session=session,
                rebalance=rebalance,
            )
            refs.append(self.request(body))
        # Each member that joined during the initial delay extends it (InitialDelayedJoin).
        for _ in range(n + 1):
            self.advance(self.config.initial_rebalance_delay_ms)
            if all(self.reply(r) is not None for r in refs):
                break
        responses = [self.join_response(r) for r in refs]
        return self.sync_all(group, responses, partitions or {t: 3 for t in topics}, assignor, inst)

    def sync_all(
        self,
        group: str,
        responses: Sequence[api.JoinGroupResponse],
        partitions: Mapping[str, int],
        assignor: str = "range",
        instances: Sequence[str | None] | None = None,
    ) -> list[Member]:
        """Every member syncs; the leader computes the assignment with the real assignor."""
        inst = list(instances) if instances is not None else [None] * len(responses)
        leader = next(r for r in responses if r.member_id == r.leader)
        plan = leader_assignment(leader, partitions, assignor)
        refs = []
        # Followers first, so their SyncGroups are parked until the leader's arrives.
        order = sorted(
            range(len(responses)), key=lambda i: responses[i].member_id == leader.member_id
        )
        for i in order:
            r = responses[i]
            body = api.SyncGroup(
                group_id=group,
                generation_id=r.generation_id,
                member_id=r.member_id,
                group_instance_id=inst[i],
                protocol_type=r.protocol_type,
                protocol_name=r.protocol_name,
                assignments=plan if r.member_id == leader.member_id else [],
            )
            refs.append((i, self.request(body)))
        members: list[Member | None] = [None] * len(responses)
        for i, ref in refs:
            r = responses[i]
            got = decode_assignment(self.sync_response(ref).assignment)
            members[i] = Member(
                r.member_id, r.generation_id, r.leader, inst[i], sorted(got.partitions)
            )
        return [m for m in members if m is not None]


def leader_assignment(
    leader: api.JoinGroupResponse, partitions: Mapping[str, int], assignor: str
) -> list[api.SyncAssignment]:
    """What a Java consumer leader does: decode subscriptions, run the assignor, encode."""
    assert leader.protocol_name is not None
    subs = {m.member_id: decode_subscription(m.metadata) for m in leader.members}
    plan = get_assignor(assignor).assign(
        {mid: s.topics for mid, s in subs.items()},
        partitions,
        owned={mid: s.owned_partitions for mid, s in subs.items()},
        generations={mid: s.generation_id for mid, s in subs.items()},
        group_instance_ids={m.member_id: m.group_instance_id for m in leader.members},
    )
    return [
        api.SyncAssignment(member_id=mid, assignment=encode_assignment(Assignment(tuple(tps))))
        for mid, tps in plan.items()
    ]
