"""A rolling upgrade from the classic protocol to KIP-848 (Kafka 4's online migration):
the group converts when the first consumer-protocol member joins, classic members keep
working through JoinGroup/SyncGroup/Heartbeat, no partition ever has two owners and no
committed offset is lost."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkacoord.coordinator.groups.consumer import ConsumerGroupState
from kafkacoord.coordinator.groups.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_subscription,
)
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api

from .consumerdriver import Consumer, consumer_group, state_of, topics_image
from .groupdriver import Driver, commit_body, join_body, partition_errors

G = "billing"
TP = tuple[str, int]


@dataclass
class ClassicClient:
    """A classic client's view (eager: it gives everything up before it rejoins)."""

    driver: Driver
    member_id: str
    generation: int
    owned: set[TP] = field(default_factory=set)
    cooperative: bool = False

    def heartbeat(self) -> ErrorCode:
        body = api.Heartbeat(group_id=G, generation_id=self.generation, member_id=self.member_id)
        return self.driver.call(body).error

    def rejoin(self) -> None:
        if not self.cooperative:
            self.owned = set()
        metadata = encode_subscription(
            Subscription(("t",), owned_partitions=tuple(sorted(self.owned)))
        )
        protocol = api.JoinProtocol(name="range", metadata=metadata)
        body = join_body(G, self.member_id, protos=[protocol])
        joined = self.driver.call(body)
        assert joined.error is ErrorCode.NONE, joined
        assert isinstance(joined.body, api.JoinGroupResponse)
        assert joined.body.skip_assignment and joined.body.leader == self.member_id
        self.generation = joined.body.generation_id
        synced = self.driver.call(
            api.SyncGroup(group_id=G, generation_id=self.generation, member_id=self.member_id,
                          protocol_type="consumer", protocol_name="range")
        )  # fmt: skip
        assert synced.error is ErrorCode.NONE, synced
        assert isinstance(synced.body, api.SyncGroupResponse)
        self.owned = set(decode_assignment(synced.body.assignment).partitions)

    def step(self) -> None:
        if self.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin()


def single_owners(classic: list[ClassicClient], consumers: list[Consumer]) -> None:
    seen: dict[TP, str] = {}
    owners = [(c.member_id, c.owned) for c in classic]
    owners += [(c.member_id, c.owned_set()) for c in consumers]
    for member_id, owned in owners:
        for tp in owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member_id}"
            seen[tp] = member_id


def settle(classic: list[ClassicClient], consumers: list[Consumer], rounds: int = 12) -> None:
    for _ in range(rounds):
        for c in classic:
            c.step()
            single_owners(classic, consumers)
        for k in consumers:
            k.ok()
            single_owners(classic, consumers)
        group = consumer_group(classic[0].driver if classic else consumers[0].driver, G)
        if group.state is ConsumerGroupState.STABLE and all(
            c.heartbeat() is ErrorCode.NONE for c in classic
        ):
            return
    raise AssertionError("the group did not settle")


def classic_group(d: Driver, n: int) -> list[ClassicClient]:
    members = d.form_group(G, n, partitions={"t": 6})
    assert d.state(G) is GroupState.STABLE
    return [ClassicClient(d, m.member_id, m.generation, set(m.assignment)) for m in members]


def test_rolling_upgrade_keeps_one_owner_per_partition_and_every_offset() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=6), d.now))
    classic = classic_group(d, 3)
    generation = classic[0].generation
    offsets = {tp: 100 + tp[1] for c in classic for tp in c.owned}
    for c in classic:
        reply = d.call(commit_body(G, {tp: offsets[tp] for tp in c.owned},
                                   member_id=c.member_id, generation=c.generation))  # fmt: skip
        assert set(partition_errors(reply).values()) == {ErrorCode.NONE}

    # The first consumer-protocol member converts the group; nothing moves yet.
    first = Consumer(d, G, "k1")
    body = first.ok()
    assert d.shard.group(G) is None
    group = consumer_group(d, G)
    assert body.member_epoch == generation + 1 and not first.owned
    for c in classic:
        converted = group.members[c.member_id]
        assert converted.classic is not None and converted.member_epoch == generation
        assert {(t, p) for t, ps in converted.assigned.items() for p in ps} == c.owned
    # Classic members learn of the new epoch from their heartbeat and rejoin.
    assert classic[0].heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
    consumers = [first]
    settle(classic, consumers)
    assert sum(len(c.owned) for c in classic) + len(first.owned) == 6

    # One by one, each classic member restarts on the consumer protocol.
    for i, c in enumerate(list(classic)):
        left = d.call(api.LeaveGroup(group_id=G, members=[api.MemberIdentity(
            member_id=c.member_id)])).body  # fmt: skip
        assert isinstance(left, api.LeaveGroupResponse)
        assert left.members[0].error is ErrorCode.NONE
        classic.remove(c)
        consumers.append(Consumer(d, G, f"k{i + 2}"))
        settle(classic, consumers)

    group = consumer_group(d, G)
    assert all(m.classic is None for m in group.members.values()) and len(group.members) == 4
    owned = [k.owned_set() for k in consumers]
    assert set().union(*owned) == {("t", p) for p in range(6)}
    assert d.shard.committed_offsets(G) == d.reload().committed_offsets(G)
    assert {tp: v.offset for tp, v in d.shard.committed_offsets(G).items()} == offsets
    fresh = d.reload().consumer_group(G)
    assert fresh is not None and state_of(fresh) == state_of(group)


def test_a_classic_member_commits_at_its_generation() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=6), d.now))
    classic = classic_group(d, 2)
    Consumer(d, G, "k1").ok()
    c = classic[0]
    stale = d.call(commit_body(G, {("t", 0): 1}, member_id=c.member_id,
                               generation=c.generation + 1))  # fmt: skip
    assert stale.error is ErrorCode.ILLEGAL_GENERATION
    ok = d.call(commit_body(G, {("t", 0): 1}, member_id=c.member_id, generation=c.generation))
    assert set(partition_errors(ok).values()) == {ErrorCode.NONE}


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    k = Consumer(d, G, "k1")
    k.ok()
    # A classic client without a member id learns one first (KIP-394).
    first = d.call(join_body(G, ""))
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    assert isinstance(first.body, api.JoinGroupResponse)
    c = ClassicClient(d, first.body.member_id, -1)
    c.rejoin()
    settle([c], [k])
    assert len(c.owned) == 2 and len(k.owned_set()) == 2
    # Its session is the classic one it asked for (10 s here), not the consumer protocol's.
    d.advance(11_000)
    k.ok()
    assert c.member_id not in consumer_group(d, G).members


def test_conversion_waits_for_a_stable_classic_group() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    classic_group(d, 2)
    d.request(join_body(G, ""))  # a new classic member: the group starts rebalancing
    new_id = d.replies[-1].body.member_id  # type: ignore[union-attr]
    d.request(join_body(G, new_id))
    assert d.state(G) is GroupState.PREPARING_REBALANCE
    reply = Consumer(d, G, "k1").heartbeat()
    assert reply.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert d.shard.consumer_group(G) is None and d.state(G) is GroupState.PREPARING_REBALANCE


def test_only_consumer_type_classic_groups_convert() -> None:
    d = Driver()
    d.apply(d.shard.on_topics(topics_image(t=4), d.now))
    # A Kafka Connect style group (its own protocol type) is refused.
    ids = d.call(join_body("workers", "", protocol_type="connect")).body
    assert isinstance(ids, api.JoinGroupResponse)
    d.request(join_body("workers", ids.member_id, protocol_type="connect"))
    d.advance(5_000)
    reply = Consumer(d, "workers", "k1").heartbeat()
    assert reply.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert "protocol type 'connect'" in (reply.message or "")
