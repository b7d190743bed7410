"""The shard host on a real broker: write then answer, reload from checkpoint, fencing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkacoord.codecs import decode_record
from kafkacoord.codecs.models import NodeKey, NodeValue
from kafkacoord.coordinator.protocol import CONTROLLER_APIS, ErrorCode
from kafkacoord.coordinator.protocol.controller_api import RegisterNode, RegisterNodeResponse
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.shard import Record, Reply, Request, RequestRef, Result
from kafkacoord.coordinator.runtime.writer import TransactionalWriter
from kafkacoord.coordinator.transport import (
    ReplySender,
    RequestClient,
    RequestError,
    RequestReceiver,
)
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import replay_consumer
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics

from .helpers import read_partition

pytestmark = pytest.mark.integration


class NodeBook:
    """A tiny shard: RegisterNode writes the node's record; the reply counts known nodes."""

    def __init__(self) -> None:
        self.nodes: dict[int, NodeValue] = {}
        self.replayed = 0

    def replay(self, record: Record) -> None:
        self.replayed += 1
        assert isinstance(record.key, NodeKey)
        if record.value is None:
            self.nodes.pop(record.key.node_id, None)
        else:
            assert isinstance(record.value, NodeValue)
            self.nodes[record.key.node_id] = record.value

    def on_loaded(self, now_ms: int) -> Result:
        return Result()

    def handle(self, request: Request, now_ms: int) -> Result:
        body = request.body
        assert isinstance(body, RegisterNode)
        value = NodeValue(body.node_id, body.incarnation, len(self.nodes) + 1, False, now_ms, 1)
        return Result(
            [Record(NodeKey(body.node_id), value)],
            [
                Reply(
                    request.ref, request.api, body=RegisterNodeResponse(node_epoch=value.node_epoch)
                )
            ],
        )

    def fire_timers(self, now_ms: int) -> Result:
        return Result()

    def next_deadline_ms(self) -> int | None:
        return None

    def on_unloaded(self) -> list[Reply]:
        return []


class Served:
    def __init__(self, bootstrap: str, topics: InternalTopics, cache: StateCache, identity: str):
        self.shard = NodeBook()
        self.replies = ReplySender(bootstrap, topics.responses, client_id="host-replies")
        recovery = ShardRecovery(
            cache, lambda: replay_consumer(bootstrap, "host-loader"), topics.metadata,
            metadata_policy(),
        )  # fmt: skip
        parts = HostParts(
            store=cache.shard(ShardId(topics.metadata, 0)),
            identity=identity,
            policy=metadata_policy(),
            recover=lambda: recovery.recover([0], identity)[0],
            make_shard=lambda: self.shard,
            make_writer=lambda: TransactionalWriter(
                bootstrap, topics.metadata, 0, transactional_id=f"{topics.prefix}controller"
            ),
            replies=self.replies,
        )
        self.stopped_with: list[Exception | None] = []
        self.host = ShardHost(
            "metadata-0", parts, unavailable=ErrorCode.NOT_CONTROLLER,
            on_stopped=lambda _, exc: self.stopped_with.append(exc),
        ).start()  # fmt: skip
        assert self.host.wait_active(30)
        self.receiver = RequestReceiver(
            bootstrap, topics.controller_requests, CONTROLLER_APIS,
            lambda _, r: self.host.submit(r), self.replies, client_id="host-recv",
        )  # fmt: skip
        self.receiver.assign([0])

    def close(self) -> None:
        self.receiver.close()
        self.host.stop()
        self.replies.close()


def register(client: RequestClient, topics: InternalTopics, node: int) -> int:
    reply = client.call(
        topics.controller_requests, 0, "RegisterNode",
        RegisterNode(node_id=node, incarnation=f"i{node}"), RegisterNodeResponse, timeout_s=30,
    )  # fmt: skip
    return reply.node_epoch


def test_answer_comes_after_the_durable_write_and_the_cache_fold(
    bootstrap: str, topics: InternalTopics, client: RequestClient, tmp_path: Path
) -> None:
    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1")
        try:
            assert register(client, topics, 1) == 1
            # The reply was released, so the record is in the log and in the cache.
            log = [(k, v) for _, k, v in read_partition(bootstrap, topics.metadata, 0)]
            assert any(decode_record(k, v)[0] == NodeKey(1) for k, v in log)
            store = cache.shard(ShardId(topics.metadata, 0))
            assert [decode_record(k, v)[0] for k, v in store.items()] == [NodeKey(1)]
            assert register(client, topics, 2) == 2
            checkpoint = store.checkpoint()
            assert checkpoint is not None and checkpoint.next_offset >= 2
        finally:
            served.close()


def test_restart_loads_from_the_cache_and_replays_the_same_state(
    bootstrap: str, topics: InternalTopics, client: RequestClient, tmp_path: Path
) -> None:
    with StateCache(tmp_path / "c") as cache:
        first = Served(bootstrap, topics, cache, "id-1")
        try:
            for node in range(5):
                register(client, topics, node)
        finally:
            first.close()
        second = Served(bootstrap, topics, cache, "id-1")
        try:
            assert set(second.shard.nodes) == set(range(5))
            assert second.shard.nodes == first.shard.nodes
            assert second.host.stats.records_loaded == 5
            assert register(client, topics, 9) == 6
        finally:
            second.close()


def test_a_newer_writer_fences_the_old_host(
    bootstrap: str, topics: InternalTopics, client: RequestClient, tmp_path: Path
) -> None:
    with StateCache(tmp_path / "a") as cache_a, StateCache(tmp_path / "b") as cache_b:
        old = Served(bootstrap, topics, cache_a, "id-1")
        try:
            register(client, topics, 1)
            old.receiver.assign([])  # only the new owner serves requests from here on
            new = Served(bootstrap, topics, cache_b, "id-1")
            try:
                assert set(new.shard.nodes) == {1}
                # The zombie's next write is rejected by the broker; it steps down.
                zombie = RegisterNode(node_id=66, incarnation="z")
                old.host.submit(Request(RequestRef("zombie", 1, 0), "RegisterNode", zombie, 2**62))
                deadline = time.monotonic() + 20
                while old.host.state is not HostState.STOPPED and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert old.host.state is HostState.STOPPED
                assert old.stopped_with and old.stopped_with[0] is not None
                assert register(client, topics, 2) == 2
                assert 66 not in new.shard.nodes
                log = [
                    decode_record(k, v) for _, k, v in read_partition(bootstrap, topics.metadata, 0)
                ]
                assert all(key != NodeKey(66) for key, _ in log)
            finally:
                new.close()
        finally:
            old.close()


def test_requests_while_stopped_get_the_unavailable_error(
    bootstrap: str, topics: InternalTopics, client: RequestClient, tmp_path: Path
) -> None:
    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1")
        register(client, topics, 1)
        served.host.stop()
        try:
            with pytest.raises(RequestError) as info:
                client.call(topics.controller_requests, 0, "RegisterNode",
                            RegisterNode(node_id=3, incarnation="x"), timeout_s=2,
                            attempt_timeout_s=1)  # fmt: skip
            assert info.value.code is ErrorCode.NOT_CONTROLLER
        finally:
            served.close()
