"""The shard host on a real broker: write then answer, reload from checkpoint, fencing."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER, StaticRoutes
from kafkacoord.codecs import decode_record, encode_key, encode_value
from kafkacoord.codecs.models import NodeKey, NodeValue
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol.controller_api import RegisterNode, RegisterNodeResponse
from kafkacoord.coordinator.runtime.driven import Processor
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.processor import LoopProcessor, ShardProcessor
from kafkacoord.coordinator.runtime.shard import (
    RawRecord,
    Record,
    Reply,
    Request,
    RequestRef,
    Result,
    Shard,
)
from kafkacoord.coordinator.runtime.writer import Delivered, ShardWriter, TransactionalWriter
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import replay_consumer
from kafkacoord.storage.errors import AppendError, PoisonRecordError
from kafkacoord.storage.fold import metadata_policy
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.wire import Listener

from .helpers import append_all, read_partition

pytestmark = pytest.mark.integration


@pytest.fixture(name="driver", params=["processor", "loop"])
def driver_fixture(request: pytest.FixtureRequest) -> str:
    """What drives the host: a processor's thread (as the controller shard is driven),
    or the listener's event loop (as the daemon drives its group shards)."""
    return str(request.param)


class NodeBook:
    """A tiny shard: RegisterNode writes the node's record; the reply counts known nodes."""

    def __init__(self) -> None:
        self.nodes: dict[int, NodeValue] = {}
        self.replayed = 0
        # Post-commit actions that ran: node ids whose registration is durable.
        self.durable: list[int] = []

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
            [functools.partial(self._durable, body.node_id)],
        )

    def _durable(self, node_id: int) -> list[Reply]:
        self.durable.append(node_id)
        return []

    def fire_timers(self, now_ms: int) -> Result:
        return Result()

    def next_deadline_ms(self) -> int | None:
        return None

    def on_unloaded(self) -> list[Reply]:
        return []


class Served:
    def __init__(
        self,
        bootstrap: str,
        topics: InternalTopics,
        cache: StateCache,
        identity: str,
        *,
        routes: StaticRoutes | None = None,
        strict: bool | None = None,
        driver: str = "processor",
        on_active: Callable[[ShardHost], None] | None = None,
        wrap_writer: Callable[[ShardWriter], ShardWriter] = lambda writer: writer,
    ) -> None:
        self.shard = NodeBook()
        self.writers_opened = 0
        self.serving = True

        def to_host(request: Request) -> None:
            if self.serving:
                self.host.submit(request)
            else:
                reject(request, ErrorCode.NOT_CONTROLLER)

        def no_groups(requests: list[tuple[int, Request]]) -> None:
            for _, request in requests:
                reject(request, ErrorCode.NOT_COORDINATOR)

        self.listener = Listener("127.0.0.1", 0, RequestDispatcher(to_host, no_groups)).start()
        loop, loop_thread = self.listener.loop, self.listener.thread_id
        assert loop is not None and loop_thread is not None
        # The same host, driven two ways: on a processor's thread, or on the listener's
        # own event loop.
        self.processor: Processor = (
            LoopProcessor(loop, loop_thread) if driver == "loop" else ShardProcessor("test-shards")
        )
        recovery = ShardRecovery(
            cache, partial(replay_consumer, bootstrap, "host-loader"), topics.metadata,
            metadata_policy(), strict=strict,
        )  # fmt: skip
        parts = HostParts(
            store=cache.shard(ShardId(topics.metadata, 0)),
            identity=identity,
            policy=metadata_policy(),
            recover=lambda: recovery.recover([0], identity)[0],
            make_shard=lambda: self.shard,
            make_writer=lambda: self._opened(wrap_writer(TransactionalWriter(
                bootstrap, topics.metadata, 0, transactional_id=f"{topics.prefix}controller"
            ))),
        )  # fmt: skip
        self.stopped_with: list[Exception | None] = []
        self.host = ShardHost(
            "metadata-0", parts, processor=self.processor, unavailable=ErrorCode.NOT_CONTROLLER,
            on_stopped=lambda _, exc: self.stopped_with.append(exc), on_active=on_active,
        ).start()  # fmt: skip
        if strict:
            return
        assert self.host.wait_active(30)
        if routes is not None:
            routes.set(CONTROLLER, self.listener.endpoint)

    def _opened(self, writer: ShardWriter) -> ShardWriter:
        self.writers_opened += 1
        return writer

    def stop_listening(self) -> None:
        """Stop taking requests (the host itself runs on)."""
        self.serving = False

    def wait_stopped(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while self.host.state is not HostState.STOPPED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.host.state is HostState.STOPPED

    def close(self) -> None:
        self.stop_listening()
        self.host.stop()
        self.processor.close()
        self.listener.close()


def register(client: CoordinatorClient, node: int) -> int:
    reply = client.call(
        CONTROLLER, RegisterNode(node_id=node, incarnation=f"i{node}"), RegisterNodeResponse,
        timeout_s=30,
    )  # fmt: skip
    return reply.node_epoch


def test_answer_comes_after_the_durable_write_and_the_cache_fold(
    bootstrap: str,
    topics: InternalTopics,
    client: CoordinatorClient,
    routes: StaticRoutes,
    tmp_path: Path,
    driver: str,
) -> None:
    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1", routes=routes, driver=driver)
        try:
            assert register(client, 1) == 1
            # The post-commit action ran before the reply was released.
            assert served.shard.durable == [1]

            # The reply was released, so the record is in the log and in the cache. (Its
            # transaction is committed; Kafka writes the commit marker that a
            # read_committed reader waits for just after EndTxn answers.)
            def logged() -> bool:
                log = read_partition(bootstrap, topics.metadata, 0)
                return any(decode_record(k, v)[0] == NodeKey(1) for _, k, v in log)

            deadline = time.monotonic() + 10
            while not logged():
                assert time.monotonic() < deadline, "the record never showed in the log"
                time.sleep(0.1)
            store = cache.shard(ShardId(topics.metadata, 0))
            assert [decode_record(k, v)[0] for k, v in store.items()] == [NodeKey(1)]
            assert register(client, 2) == 2
            checkpoint = store.checkpoint()
            assert checkpoint is not None and checkpoint.next_offset >= 2
        finally:
            served.close()


def test_work_queued_as_the_host_becomes_active_runs_once_it_is_driven(
    bootstrap: str, topics: InternalTopics, tmp_path: Path, driver: str
) -> None:
    # As the group service does: once a shard is active it queues the current topics,
    # before the processor drives the host.
    ran = threading.Event()

    def queued(shard: Shard, now: int) -> Result:
        ran.set()
        return Result()

    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1", driver=driver,
                        on_active=lambda host: host.call_soon(queued))  # fmt: skip
        try:
            assert ran.wait(10)
        finally:
            served.close()


def test_restart_loads_from_the_cache_and_replays_the_same_state(
    bootstrap: str,
    topics: InternalTopics,
    client: CoordinatorClient,
    routes: StaticRoutes,
    tmp_path: Path,
    driver: str,
) -> None:
    with StateCache(tmp_path / "c") as cache:
        first = Served(bootstrap, topics, cache, "id-1", routes=routes, driver=driver)
        try:
            for node in range(5):
                register(client, node)
        finally:
            first.close()
        second = Served(bootstrap, topics, cache, "id-1", routes=routes, driver=driver)
        try:
            assert set(second.shard.nodes) == set(range(5))
            assert second.shard.nodes == first.shard.nodes
            assert second.host.stats.records_loaded == 5
            assert register(client, 9) == 6
        finally:
            second.close()


def test_a_newer_writer_fences_the_old_host(
    bootstrap: str,
    topics: InternalTopics,
    client: CoordinatorClient,
    routes: StaticRoutes,
    tmp_path: Path,
    driver: str,
) -> None:
    with StateCache(tmp_path / "a") as cache_a, StateCache(tmp_path / "b") as cache_b:
        old = Served(bootstrap, topics, cache_a, "id-1", routes=routes, driver=driver)
        try:
            register(client, 1)
            old.stop_listening()  # only the new owner serves requests from here on
            new = Served(bootstrap, topics, cache_b, "id-1", routes=routes, driver=driver)
            try:
                assert set(new.shard.nodes) == {1}
                # The zombie's next write is rejected by the broker; it steps down.
                zombie = RegisterNode(node_id=66, incarnation="z")
                old.host.submit(Request(RequestRef("zombie", 1), "RegisterNode", zombie))
                old.wait_stopped(20)
                assert old.stopped_with and old.stopped_with[0] is not None
                assert register(client, 2) == 2
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
    bootstrap: str,
    topics: InternalTopics,
    client: CoordinatorClient,
    routes: StaticRoutes,
    tmp_path: Path,
    driver: str,
) -> None:
    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1", routes=routes, driver=driver)
        register(client, 1)
        served.host.stop()
        try:
            with pytest.raises(RequestError) as info:
                client.call(CONTROLLER, RegisterNode(node_id=3, incarnation="x"),
                            RegisterNodeResponse, timeout_s=2, attempt_timeout_s=1)  # fmt: skip
            assert info.value.code is ErrorCode.NOT_CONTROLLER
        finally:
            served.close()


class HangingWriter:
    """Appends hang until ``give_up``, then fail as a broker that stopped answering. The
    submit blocks its caller, as the controller's transactional append does."""

    def __init__(self, inner: ShardWriter) -> None:
        self.inner = inner
        self.hanging = threading.Event()
        self.give_up = threading.Event()

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        return self.inner.write(records)

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        self.hanging.set()
        self.give_up.wait(30)
        done([-1] * len(records), AppendError("broker did not answer", retriable=True))

    def close(self) -> None:
        self.inner.close()


def test_a_host_told_to_stop_while_its_append_hangs_stops_rather_than_reloads(
    bootstrap: str, topics: InternalTopics, tmp_path: Path, driver: str
) -> None:
    """Found by the fault campaign on tansu: a controller lost its lease while an append
    hung; when the append failed it reloaded, opened a new writer and fenced the
    controller that had won, leaving the cluster with none for four minutes."""
    writers: list[HangingWriter] = []

    def hanging(writer: ShardWriter) -> ShardWriter:
        writers.append(HangingWriter(writer))
        return writers[-1]

    with StateCache(tmp_path / "c") as cache:
        served = Served(bootstrap, topics, cache, "id-1", driver=driver, wrap_writer=hanging)
        try:
            body = RegisterNode(node_id=1, incarnation="i1")
            served.host.submit(Request(RequestRef("c", 1), "RegisterNode", body))
            assert writers[0].hanging.wait(10)
            served.host.stop(timeout_s=0)  # the lease ends while the append hangs
            writers[0].give_up.set()
            served.wait_stopped()
            time.sleep(0.5)  # a reload would have opened its writer by now
            assert served.writers_opened == 1
            assert served.host.state is HostState.STOPPED
        finally:
            served.close()


def test_a_strict_load_stops_at_a_poison_record_with_one_error_line(
    bootstrap: str, topics: InternalTopics, tmp_path: Path, driver: str
) -> None:
    node = (encode_key(NodeKey(1)), encode_value(NodeValue(1, "i", 1, False, 1, 1)))
    append_all(bootstrap, topics.metadata, [(0, *node), (0, b"\x63\x01garbage", b"\x00\x02zz")])
    with StateCache(tmp_path / "c") as cache, capture_logs() as logs:
        served = Served(bootstrap, topics, cache, "id-1", strict=True, driver=driver)
        try:
            served.wait_stopped()
        finally:
            served.close()
    assert len(served.stopped_with) == 1
    failure = served.stopped_with[0]
    assert isinstance(failure, PoisonRecordError)
    assert (failure.topic, failure.partition, failure.offset) == (topics.metadata, 0, 1)
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert [entry["event"] for entry in errors] == ["shard load stopped at a poison record"]
    # An expected, already-reported stop: no traceback.
    assert "exc_info" not in errors[0]
    assert served.host.state is HostState.STOPPED
    # Nothing past the poison record was folded into the cache.
    checkpoint = cache_checkpoint(tmp_path / "c", topics)
    assert checkpoint is None or checkpoint <= 1


def cache_checkpoint(path: Path, topics: InternalTopics) -> int | None:
    with StateCache(path) as cache:
        checkpoint = cache.shard(ShardId(topics.metadata, 0)).checkpoint()
    return None if checkpoint is None else checkpoint.next_offset
