"""ConsumerGroupHeartbeat's binary bodies (api version 1): the request and its reply.

Fields in the order of Kafka's schema (KIP-848), then kafkacoord's client id and host,
which Kafka takes from the request header. A nullable array (count -1) or string
(length -1) is a field left unchanged since the member's last heartbeat. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from . import group_api as g
from .binary_codec import I32, NULL_ARRAY, Reader, int32_array, nullable, string

__all__ = [
    "BinaryConsumerHeartbeat",
    "BinaryTopicPartitions",
    "ConsumerHeartbeatRequest",
    "TopicPartitionsRequest",
    "decode_consumer_heartbeat",
    "decode_consumer_heartbeat_response",
    "encode_consumer_heartbeat",
    "encode_consumer_heartbeat_response",
]

_API: Final = "ConsumerGroupHeartbeat"
_TOPIC_LEAST: Final = 6  # an empty name and no partitions


class TopicPartitionsRequest(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class ConsumerHeartbeatRequest(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...
    @property
    def subscribed_topic_regex(self) -> str | None: ...
    @property
    def server_assignor(self) -> str | None: ...
    @property
    def topic_partitions(self) -> Sequence[TopicPartitionsRequest] | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...


class BinaryTopicPartitions:
    __slots__ = ("partitions", "topic")

    def __init__(self, topic: str, partitions: list[int]) -> None:
        self.topic = topic
        self.partitions = partitions


class BinaryConsumerHeartbeat:
    __slots__ = (
        "client_host", "client_id", "group_id", "instance_id", "member_epoch", "member_id",
        "rack_id", "rebalance_timeout_ms", "server_assignor", "subscribed_topic_names",
        "subscribed_topic_regex", "topic_partitions",
    )  # fmt: skip

    def __init__(
        self, group_id: str, member_id: str, member_epoch: int, *, instance_id: str | None,
        rack_id: str | None, rebalance_timeout_ms: int, subscribed_topic_names: list[str] | None,
        subscribed_topic_regex: str | None, server_assignor: str | None,
        topic_partitions: list[BinaryTopicPartitions] | None, client_id: str, client_host: str,
    ) -> None:  # fmt: skip
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.subscribed_topic_names = subscribed_topic_names
        self.subscribed_topic_regex = subscribed_topic_regex
        self.server_assignor = server_assignor
        self.topic_partitions = topic_partitions
        self.client_id = client_id
        self.client_host = client_host


def _read_topic_partitions(r: Reader, field: str) -> list[BinaryTopicPartitions] | None:
    n = r.nullable_count(field, _TOPIC_LEAST)
    if n < 0:
        return None
    return [
        BinaryTopicPartitions(r.string(f"{field}.topic"), r.int32s(f"{field}.partitions"))
        for _ in range(n)
    ]


def _topic_partitions(items: Sequence[TopicPartitionsRequest] | None) -> list[bytes]:
    if items is None:
        return [NULL_ARRAY]
    parts = [I32.pack(len(items))]
    for item in items:
        parts.append(string(item.topic))
        parts.append(int32_array(item.partitions))
    return parts


def decode_consumer_heartbeat(data: bytes) -> BinaryConsumerHeartbeat:
    """A ConsumerGroupHeartbeat v1 body; :class:`RequestBodyError` if it does not parse."""
    r = Reader(data, _API)
    group_id = r.string("group_id")
    member_id = r.string("member_id")
    member_epoch = r.int32("member_epoch")
    instance_id = r.nullable("instance_id")
    rack_id = r.nullable("rack_id")
    rebalance_timeout_ms = r.int32("rebalance_timeout_ms")
    names = r.strings("subscribed_topic_names")
    regex = r.nullable("subscribed_topic_regex")
    assignor = r.nullable("server_assignor")
    owned = _read_topic_partitions(r, "topic_partitions")
    client_id = r.string("client_id")
    client_host = r.string("client_host")
    r.end()
    return BinaryConsumerHeartbeat(
        group_id, member_id, member_epoch, instance_id=instance_id, rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=names,
        subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=owned,
        client_id=client_id, client_host=client_host,
    )  # fmt: skip


def encode_consumer_heartbeat(body: ConsumerHeartbeatRequest) -> bytes:
    """The v1 body of a consumer group heartbeat (a client's side)."""
    names = body.subscribed_topic_names
    parts = [
        string(body.group_id), string(body.member_id), I32.pack(body.member_epoch),
        nullable(body.instance_id), nullable(body.rack_id), I32.pack(body.rebalance_timeout_ms),
        NULL_ARRAY if names is None else I32.pack(len(names)),
        *(string(name) for name in names or ()),
        nullable(body.subscribed_topic_regex), nullable(body.server_assignor),
        *_topic_partitions(body.topic_partitions),
        string(body.client_id), string(body.client_host),
    ]  # fmt: skip
    return b"".join(parts)


def encode_consumer_heartbeat_response(body: g.ConsumerGroupHeartbeatResponse) -> bytes:
    """The v1 body of a consumer group heartbeat's reply (the daemon's side)."""
    return b"".join((
        nullable(body.member_id), I32.pack(body.member_epoch),
        I32.pack(body.heartbeat_interval_ms), *_topic_partitions(body.assignment),
    ))  # fmt: skip


def decode_consumer_heartbeat_response(data: bytes) -> g.ConsumerGroupHeartbeatResponse:
    """A v1 reply body, as the JSON one decodes (a client's side)."""
    r = Reader(data, "ConsumerGroupHeartbeatResponse")
    member_id = r.nullable("member_id")
    member_epoch = r.int32("member_epoch")
    interval = r.int32("heartbeat_interval_ms")
    assignment = _read_topic_partitions(r, "assignment")
    r.end()
    return g.ConsumerGroupHeartbeatResponse.model_validate({
        "member_id": member_id, "member_epoch": member_epoch, "heartbeat_interval_ms": interval,
        "assignment": None if assignment is None else [
            {"topic": a.topic, "partitions": a.partitions} for a in assignment
        ],
    })  # fmt: skip
