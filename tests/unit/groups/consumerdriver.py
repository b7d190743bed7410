"""Drives KIP-848 members against a GroupShard by hand (see groupdriver.Driver)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkacoord.codecs.models import SubscribedTopic
from kafkacoord.coordinator.groups.consumer import ConsumerGroup
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.base import PUSH_CORRELATION_ID
from kafkacoord.coordinator.runtime.shard import Reply

from .groupdriver import Driver

REBALANCE = 30_000
Owned = dict[str, set[int]]


def topics_image(**counts: int) -> dict[str, SubscribedTopic]:
    return {t: SubscribedTopic(t, n) for t, n in counts.items()}


class Connection:
    """Stands in for a member's connection: hints are replies sent down it."""

    def deliver(self, replies: Sequence[Reply]) -> None:
        raise AssertionError("the test driver collects replies itself")


@dataclass
class Consumer:
    """A KIP-848 client as far as the coordinator can tell: its epoch and what it owns."""

    driver: Driver
    group: str
    member_id: str
    topics: Sequence[str] = ("t",)
    instance: str | None = None
    epoch: int = 0
    owned: Owned = field(default_factory=dict)
    last: Reply | None = None
    connection: Connection = field(default_factory=Connection)

    def heartbeat(self, *, full: bool = False, **overrides: object) -> Reply:
        joining = self.epoch == 0
        fields: dict[str, object] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance,
            "rebalance_timeout_ms": REBALANCE if joining or full else -1,
            "subscribed_topic_names": list(self.topics) if joining or full else None,
            "topic_partitions": self.reported(),
        }
        body = api.ConsumerGroupHeartbeat(**{**fields, **overrides})  # type: ignore[arg-type]
        reply = self.driver.call(body, client_id=self.member_id, channel=self.connection)
        self.last = reply
        if reply.error is ErrorCode.NONE:
            assert isinstance(reply.body, api.ConsumerGroupHeartbeatResponse)
            self.epoch = reply.body.member_epoch
            if reply.body.assignment is not None:
                # A client revokes what is gone and takes what is new at once here.
                self.owned = {a.topic: set(a.partitions) for a in reply.body.assignment}
        return reply

    def reported(self) -> list[api.HeartbeatTopicPartitions]:
        return [
            api.HeartbeatTopicPartitions(topic=t, partitions=sorted(ps))
            for t, ps in sorted(self.owned.items())
            if ps
        ]

    def ok(self, **overrides: object) -> api.ConsumerGroupHeartbeatResponse:
        reply = self.heartbeat(**overrides)
        assert reply.error is ErrorCode.NONE, reply
        assert isinstance(reply.body, api.ConsumerGroupHeartbeatResponse)
        return reply.body

    def owned_set(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def hinted(driver: Driver, since: int = 0) -> list[str]:
    """The members hinted since reply number ``since``, in order."""
    return [
        r.body.member_id
        for r in driver.replies[since:]
        if r.to.correlation_id == PUSH_CORRELATION_ID and isinstance(r.body, api.ConsumerGroupHint)
    ]


def consumer_group(driver: Driver, group: str) -> ConsumerGroup:
    found = driver.shard.consumer_group(group)
    assert found is not None
    return found


def assert_single_owners(consumers: Sequence[Consumer]) -> None:
    """No partition is owned by two clients at once."""
    seen: dict[tuple[str, int], str] = {}
    for c in consumers:
        for tp in c.owned_set():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id


def converge(consumers: Sequence[Consumer], rounds: int = 10) -> None:
    """Heartbeat in turns until nothing changes, checking single ownership each step."""
    for _ in range(rounds):
        before = [(c.epoch, c.owned_set()) for c in consumers]
        for c in consumers:
            c.ok()
            assert_single_owners(consumers)
        if before == [(c.epoch, c.owned_set()) for c in consumers]:
            return
    raise AssertionError("the group did not converge")


def state_of(group: ConsumerGroup) -> Mapping[str, object]:
    """Everything replay builds, comparable across shards."""
    return {
        "epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": {m: group.members[m] for m in sorted(group.members)},
        "targets": {m: dict(a) for m, a in sorted(group.targets.items())},
        "static": dict(group.static_members),
        "metadata": dict(group.subscription_metadata),
        "partition_epochs": dict(group.partition_epochs),
    }
