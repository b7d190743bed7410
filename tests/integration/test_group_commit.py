"""Group commit across shards on a real broker and a real RocksDB.

Several group shards share one processor, as in the daemon: the batches of one turn
finish together, are folded into the cache in one write, and their replies go out
together, only after every record is acknowledged. A shard whose append fails (here:
fenced by a newer leader epoch) fails alone; the other shards of the same turn answer.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from kafkacoord.client.connector import CoordinatorClient, error_of
from kafkacoord.client.routes import StaticRoutes
from kafkacoord.codecs import decode_record, encode_key, encode_record
from kafkacoord.codecs.models import OffsetCommitKey, ShardLeaderKey, ShardLeaderValue
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.groups.shard import GroupShard
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.runtime.driven import Processor
from kafkacoord.coordinator.runtime.epoch_writer import LeaderEpochWriter, SharedProducer
from kafkacoord.coordinator.runtime.host import HostParts, HostState, ShardHost
from kafkacoord.coordinator.runtime.processor import LoopProcessor, ShardProcessor
from kafkacoord.coordinator.runtime.shard import Reply, Request, RequestRef
from kafkacoord.coordinator.runtime.writer import (
    Delivered,
    RawRecord,
    ShardWriter,
    WriterFencedError,
)
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.storage.batch_producer import IoLoop
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import admin_client, replay_consumer
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.fold import offsets_policy
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from kafkacoord.wire import Listener

from .helpers import read_partition

pytestmark = pytest.mark.integration

SHARDS = 3
RETENTION_MS = 7 * 24 * 3600 * 1000


@pytest.fixture(name="driver", params=["processor", "loop", "loop-four-groups"])
def driver_fixture(request: pytest.FixtureRequest) -> str:
    """What drives the shards: a shared processor thread, or the listener's event loop
    with one group in flight (the daemon's: turns hold records back and requests wait
    for a turn) or with four."""
    return str(request.param)


@pytest.fixture
def offsets(bootstrap: str, prefix: str) -> InternalTopics:
    topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    return topics


@dataclass
class Delivery:
    """One hand-over of replies to a connection, and what the cache held at that moment."""

    replies: list[Reply]
    checkpoints: dict[int, int]
    cached: dict[bytes, bytes | None]


@dataclass
class Recorder:
    """A reply channel that records, at the moment replies are handed over, the cache's
    checkpoint of every shard and the cached value of every committed key."""

    cache: StateCache
    topic: str
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def deliver(self, replies: Sequence[Reply]) -> None:
        checkpoints = {}
        for shard in range(SHARDS):
            checkpoint = self.cache.shard(ShardId(self.topic, shard)).checkpoint()
            checkpoints[shard] = -1 if checkpoint is None else checkpoint.next_offset
        cached = {}
        for reply in replies:
            key = encode_key(_key_of(reply.to.correlation_id))
            cached[key] = self.cache.shard(ShardId(self.topic, _shard_of(reply))).get(key)
        with self.lock:
            self.deliveries.append(Delivery(list(replies), checkpoints, cached))

    def replies(self) -> list[Reply]:
        with self.lock:
            return [r for d in self.deliveries for r in d.replies]


def _key_of(n: int) -> OffsetCommitKey:
    return OffsetCommitKey(f"group-{n}", "events", n)


def _shard_of(reply: Reply) -> int:
    return reply.to.correlation_id % SHARDS


def commit(n: int, channel: Recorder | None = None) -> tuple[int, Request]:
    """Commit number ``n``: its own key, on shard ``n % SHARDS``."""
    key = _key_of(n)
    body = g.OffsetCommit(
        group_id=key.group,
        topics=[g.CommitTopic(name=key.topic, partitions=[g.CommitPartition(
            partition=key.partition, offset=1000 + n)])],
    )  # fmt: skip
    return n % SHARDS, Request(RequestRef("test", n, channel), "OffsetCommit", body)


def fetch(n: int, channel: Recorder) -> tuple[int, Request]:
    """Read back the offsets of commit ``n``'s group, on its shard."""
    body = g.OffsetFetch(group_id=_key_of(n).group)
    return n % SHARDS, Request(RequestRef("test", SHARDS * 1000 + n, channel), "OffsetFetch", body)


class GroupShards:
    """Group shards on one processor, behind a listener: as the daemon hosts them."""

    def __init__(
        self, bootstrap: str, topics: InternalTopics, cache: StateCache, driver: str
    ) -> None:
        self.topic = topics.offsets
        self.listener = Listener(
            "127.0.0.1", 0, RequestDispatcher(lambda r: reject(r, ErrorCode.NOT_CONTROLLER),
                                              self.dispatch),
        ).start()  # fmt: skip
        loop, loop_thread = self.listener.loop, self.listener.thread_id
        assert loop is not None and loop_thread is not None
        groups = 4 if driver == "loop-four-groups" else 1
        # As the daemon runs them: on the loop drivers the shards' appends share the
        # listener's loop too.
        self.shared = SharedProducer(
            bootstrap, "test-group-commit", timeout_s=10,
            io=IoLoop.running(loop, loop_thread) if driver.startswith("loop") else None,
        )  # fmt: skip
        self.processor: Processor = (
            LoopProcessor(loop, loop_thread, max_inflight_groups=groups)
            if driver.startswith("loop")
            else ShardProcessor("test")
        )
        recovery = ShardRecovery(
            cache, partial(replay_consumer, bootstrap, "group-commit-loader"), self.topic,
            offsets_policy(RETENTION_MS),
        )  # fmt: skip
        self.stopped: dict[int, Exception | None] = {}
        self.hosts = [self._host(bootstrap, cache, recovery, p).start() for p in range(SHARDS)]
        for host in self.hosts:
            assert host.wait_active(30)
        # Active, then handed to the processor: requests put before that are refused.
        wait_for(lambda: all(host._attached for host in self.hosts))

    def _host(
        self, bootstrap: str, cache: StateCache, recovery: ShardRecovery, partition: int
    ) -> ShardHost:
        marker = encode_record(ShardLeaderKey(), ShardLeaderValue(1, 1, "test", 1))
        parts = HostParts(
            store=cache.shard(ShardId(self.topic, partition)),
            identity="id-1",
            policy=offsets_policy(RETENTION_MS),
            recover=lambda: recovery.recover([partition], "id-1")[partition],
            make_shard=lambda: GroupShard(GroupConfig(), partition),
            make_writer=lambda: LeaderEpochWriter(
                self.shared, self.topic, partition, epoch=1, marker=marker
            ),
            replies=self.processor.replies,
        )
        return ShardHost(
            f"offsets-{partition}", parts, processor=self.processor,
            on_stopped=lambda _, exc: self.stopped.__setitem__(partition, exc),
        )  # fmt: skip

    def dispatch(self, requests: list[tuple[int, Request]]) -> None:
        self.processor.put_many([(self.hosts[shard], request) for shard, request in requests])

    def close(self) -> None:
        for host in self.hosts:
            host.stop()
        self.processor.close()
        self.shared.close()  # before the listener's loop, which it may share, stops
        self.listener.close()


@pytest.fixture
def served(
    bootstrap: str, offsets: InternalTopics, tmp_path: Path, driver: str
) -> Iterator[tuple[GroupShards, StateCache]]:
    with StateCache(tmp_path / "cache") as cache:
        shards = GroupShards(bootstrap, offsets, cache, driver)
        try:
            yield shards, cache
        finally:
            shards.close()


def wait_for(condition: object, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def committed_once_per_shard(shards: GroupShards, cache: StateCache) -> Recorder:
    """A recorder that holds one answered commit of every shard (0 .. SHARDS - 1)."""
    recorder = Recorder(cache, shards.topic)
    first = [commit(n, recorder) for n in range(SHARDS)]
    shards.processor.put_many([(shards.hosts[shard], request) for shard, request in first])
    wait_for(lambda: len(recorder.replies()) == SHARDS)
    return recorder


def logged_offsets(bootstrap: str, topic: str, shard: int) -> dict[bytes, int]:
    """Each commit key's offset in the log of ``shard``."""
    return {
        key: offset
        for offset, key, value in read_partition(bootstrap, topic, shard)
        if key is not None and isinstance(decode_record(key, value)[0], OffsetCommitKey)
    }


def test_a_turn_commits_every_shard_together_and_answers_only_once_durable(
    bootstrap: str, served: tuple[GroupShards, StateCache]
) -> None:
    shards, cache = served
    recorder = Recorder(cache, shards.topic)
    # One hand-over, one turn: a commit for each shard.
    first = [commit(n, recorder) for n in range(SHARDS)]
    shards.processor.put_many([(shards.hosts[shard], request) for shard, request in first])
    wait_for(lambda: len(recorder.replies()) == SHARDS)
    # Released together: one hand-over holds the replies of every shard.
    assert len(recorder.deliveries) == 1
    assert {_shard_of(r) for r in recorder.deliveries[0].replies} == set(range(SHARDS))
    assert all(r.error is ErrorCode.NONE for r in recorder.replies())

    # More turns, in several hand-overs, while appends are in flight.
    total = SHARDS + 60
    for start in range(SHARDS, total, 6):
        shards.processor.put_many([
            (shards.hosts[shard], request)
            for shard, request in (commit(n, recorder) for n in range(start, start + 6))
        ])  # fmt: skip
    wait_for(lambda: len(recorder.replies()) == total)
    assert all(r.error is ErrorCode.NONE for r in recorder.replies())

    # Write, then answer: when a reply was handed over, its record was acknowledged at
    # an offset the cache's checkpoint already covered, and its value was in the cache.
    offsets = {}
    for shard in range(SHARDS):
        offsets.update(
            {k: (shard, o) for k, o in logged_offsets(bootstrap, shards.topic, shard).items()}
        )
    for delivery in recorder.deliveries:
        for reply in delivery.replies:
            key = encode_key(_key_of(reply.to.correlation_id))
            shard, offset = offsets[key]
            assert shard == _shard_of(reply)
            assert offset < delivery.checkpoints[shard]
            assert delivery.cached[key] is not None


def test_a_fenced_shard_fails_alone_in_a_shared_turn(
    bootstrap: str, served: tuple[GroupShards, StateCache]
) -> None:
    shards, cache = served
    recorder = committed_once_per_shard(shards, cache)

    # A newer leader of shard 1 announces itself: the old writer of shard 1 is a zombie.
    fenced = 1
    newer = SharedProducer(bootstrap, "test-group-commit-newer", timeout_s=10)
    try:
        LeaderEpochWriter(newer, shards.topic, fenced, epoch=2,
                          marker=encode_record(ShardLeaderKey(), ShardLeaderValue(2, 2, "new", 1)),
                          ).close()  # fmt: skip
    finally:
        newer.close()

    # One turn with a commit for every shard, and a second one behind it.
    later = [commit(n, recorder) for n in range(SHARDS, 4 * SHARDS)]
    shards.processor.put_many([(shards.hosts[s], r) for s, r in later[:SHARDS]])
    shards.processor.put_many([(shards.hosts[s], r) for s, r in later[SHARDS:]])
    wait_for(lambda: len(recorder.replies()) == 4 * SHARDS)

    by_shard: dict[int, set[ErrorCode]] = {}
    for reply in recorder.replies()[SHARDS:]:
        by_shard.setdefault(_shard_of(reply), set()).add(reply.error)
    # The fenced shard's requests fail (retriable: the caller finds the new leader)...
    assert by_shard[fenced] == {ErrorCode.NOT_COORDINATOR}
    # ... and only its: the other shards of the same turns answered.
    assert by_shard[0] == by_shard[2] == {ErrorCode.NONE}
    wait_for(lambda: shards.hosts[fenced].state is HostState.STOPPED)
    assert isinstance(shards.stopped[fenced], WriterFencedError)
    assert shards.hosts[0].state is shards.hosts[2].state is HostState.ACTIVE

    # The zombie's cache kept nothing of what it could not make durable; the others
    # hold every commit they answered.
    for shard in range(SHARDS):
        store = cache.shard(ShardId(shards.topic, shard))
        for _, request in later:
            n = request.ref.correlation_id
            if n % SHARDS != shard:
                continue
            cached = store.get(encode_key(_key_of(n)))
            assert (cached is None) == (shard == fenced)


class WrappedWriter:
    """A shard writer around another: what a subclass leaves alone goes through."""

    def __init__(self, writer: ShardWriter) -> None:
        self._writer = writer

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        self._writer.submit(records, done)

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        return self._writer.write(records)

    def close(self) -> None:
        self._writer.close()


class FailNextAppends(WrappedWriter):
    """A writer whose appends fail (retriable), as after a broker's leadership change."""

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        done([], AppendError("injected: the partition's leader moved", retriable=True))

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        raise AppendError("injected", retriable=True)


def test_a_failed_append_reloads_its_shard_off_the_processor_while_the_others_answer(
    served: tuple[GroupShards, StateCache],
) -> None:
    shards, cache = served
    recorder = committed_once_per_shard(shards, cache)

    failing = 1
    host = shards.hosts[failing]
    reloading, release = threading.Event(), threading.Event()
    make_writer = host.parts.make_writer

    def slow_writer() -> ShardWriter:
        reloading.set()
        assert release.wait(30)
        return make_writer()

    host.parts = dataclasses.replace(host.parts, make_writer=slow_writer)
    host.appends.writer = FailNextAppends(make_writer())

    # The failing shard's append fails: its caller may retry elsewhere, and it reloads.
    _, failed = commit(SHARDS + failing, recorder)
    shards.processor.put(host, failed)
    wait_for(lambda: len(recorder.replies()) == SHARDS + 1)
    assert recorder.replies()[-1].error is ErrorCode.NOT_COORDINATOR
    assert reloading.wait(30)

    # While its reload waits, the processor serves the other shards; the reloading one
    # answers that it is loading.
    during = [commit(n, recorder) for n in range(2 * SHARDS, 3 * SHARDS)]
    shards.processor.put_many([(shards.hosts[s], r) for s, r in during])
    wait_for(lambda: len(recorder.replies()) == 2 * SHARDS + 1)
    errors = {_shard_of(r): r.error for r in recorder.replies()[SHARDS + 1 :]}
    assert errors == {0: ErrorCode.NONE, failing: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                      2: ErrorCode.NONE}  # fmt: skip
    assert host.state is HostState.LOADING

    # Reloaded, it attaches again and serves, with what it answered before intact.
    release.set()
    wait_for(lambda: host.state is HostState.ACTIVE and host._attached)
    _, again = commit(3 * SHARDS + failing, recorder)
    shards.processor.put(host, again)
    wait_for(lambda: len(recorder.replies()) == 2 * SHARDS + 2)
    assert recorder.replies()[-1].error is ErrorCode.NONE
    store = cache.shard(ShardId(shards.topic, failing))
    assert store.get(encode_key(_key_of(failing))) is not None  # the warm-up commit
    assert store.get(encode_key(_key_of(SHARDS + failing))) is None  # never durable
    assert failing not in shards.stopped


class HoldAppends(WrappedWriter):
    """A writer whose appends wait until released, as behind a slow broker."""

    def __init__(self, writer: ShardWriter) -> None:
        super().__init__(writer)
        self._lock = threading.Lock()
        self._released = False
        self.waiting: list[tuple[Sequence[RawRecord], Delivered]] = []

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        with self._lock:
            if not self._released:
                self.waiting.append((records, done))
                return
        self._writer.submit(records, done)

    def release(self) -> None:
        with self._lock:
            self._released = True
            waiting, self.waiting = self.waiting, []
        for records, done in waiting:
            self._writer.submit(records, done)


def holding_appends_of(
    shard: int, shards: GroupShards, cache: StateCache
) -> tuple[Recorder, ShardHost, HoldAppends]:
    """Every shard answered once; then ``shard``'s appends wait until released."""
    recorder = committed_once_per_shard(shards, cache)
    host = shards.hosts[shard]
    assert host.appends.writer is not None
    held = HoldAppends(host.appends.writer)
    host.appends.writer = held
    return recorder, host, held


def test_a_stopping_shard_finishes_its_appends_while_the_processor_serves_on(
    served: tuple[GroupShards, StateCache],
) -> None:
    shards, cache = served
    stopping = 1
    recorder, host, held = holding_appends_of(stopping, shards, cache)
    _, handled = commit(SHARDS + stopping, recorder)
    shards.processor.put(host, handled)
    wait_for(lambda: bool(held.waiting))
    host.stop(timeout_s=0)  # as an emigration does: its owner does not wait

    # Its append waits on the broker; the processor serves the other shards, and the
    # stopping one takes no new work. (Reads: with one group in flight, new appends of
    # any shard would queue behind the held one until it counts as stalled.)
    during = [fetch(n, recorder) for n in range(SHARDS)]
    shards.processor.put_many([(shards.hosts[s], r) for s, r in during])
    wait_for(lambda: len(recorder.replies()) == 2 * SHARDS)
    errors = {_shard_of(r): r.error for r in recorder.replies()[SHARDS:]}
    assert errors == {0: ErrorCode.NONE, stopping: ErrorCode.NOT_COORDINATOR,
                      2: ErrorCode.NONE}  # fmt: skip
    assert not host.finished

    # Once the broker answers, what it handled before the stop is durable and answered.
    held.release()
    wait_for(lambda: host.finished)
    last = recorder.replies()[-1]
    assert (last.to.correlation_id, last.error) == (SHARDS + stopping, ErrorCode.NONE)
    assert (
        cache.shard(ShardId(shards.topic, stopping)).get(encode_key(_key_of(SHARDS + stopping)))
        is not None
    )
    assert shards.stopped[stopping] is None


def test_a_shard_whose_appends_hang_holds_back_only_its_own_replies(
    served: tuple[GroupShards, StateCache],
) -> None:
    shards, cache = served
    hung = 1
    recorder, _, held = holding_appends_of(hung, shards, cache)

    # Round after round every shard commits in one turn, so every group carries the
    # hung shard's batch until its own pipeline is full: more rounds than groups may
    # be in flight. The other shards' commits are answered all the same.
    rounds = 6
    for r in range(1, rounds + 1):
        batch = [commit(r * SHARDS + s, recorder) for s in range(SHARDS)]
        shards.processor.put_many([(shards.hosts[s], request) for s, request in batch])
        wait_for(lambda r=r: {(r * SHARDS + s) for s in range(SHARDS) if s != hung}
                 <= {reply.to.correlation_id for reply in recorder.replies()}, 10)  # fmt: skip
    answered = {reply.to.correlation_id: reply.error for reply in recorder.replies()}
    assert all(answered[n] is ErrorCode.NONE for n in answered if n % SHARDS != hung)
    assert not [n for n in answered if n >= SHARDS and n % SHARDS == hung]
    assert held.waiting

    # Once its broker answers, the hung shard's commits are answered, in order.
    held.release()
    mine = [r * SHARDS + hung for r in range(1, rounds + 1)]
    wait_for(lambda: set(mine) <= {reply.to.correlation_id for reply in recorder.replies()})
    replies = [reply for reply in recorder.replies() if reply.to.correlation_id in mine]
    assert [reply.to.correlation_id for reply in replies] == mine
    assert all(reply.error is ErrorCode.NONE for reply in replies)
    store = cache.shard(ShardId(shards.topic, hung))
    assert all(store.get(encode_key(_key_of(n))) is not None for n in mine)
    assert not shards.stopped


def test_pipelined_commits_over_a_connection_all_land_once(
    bootstrap: str, served: tuple[GroupShards, StateCache], offsets: InternalTopics
) -> None:
    shards, cache = served
    routes = StaticRoutes(default=shards.listener.endpoint)
    with CoordinatorClient(bootstrap, topic_prefix=offsets.prefix, routes=routes) as client:
        futures: list[Future[object]] = []
        for n in range(600):
            shard, request = commit(n)
            futures.append(client.send(shard, request.body)[1])  # type: ignore[arg-type]
        for future in futures:
            assert error_of(future.result(30)).name == "NONE"  # type: ignore[arg-type]
    for shard in range(SHARDS):
        logged = logged_offsets(bootstrap, shards.topic, shard)
        store = cache.shard(ShardId(shards.topic, shard))
        expected = {encode_key(_key_of(n)) for n in range(600) if n % SHARDS == shard}
        assert set(logged) == expected
        assert all(store.get(key) is not None for key in expected)
