"""Leader-epoch fencing of group-shard appends on a real broker.

A deposed leader (epoch 1) keeps writing after a new leader (epoch 2) announced
itself: the old writer must never report those writes durable, and every reader
of the log must ignore them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkacoord.codecs import encode_key, encode_record, encode_value
from kafkacoord.codecs.models import (
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.coordinator.runtime.epoch_writer import LeaderEpochWriter, SharedProducer
from kafkacoord.coordinator.runtime.writer import Delivered, RawRecord, WriterFencedError
from kafkacoord.loops import new_event_loop
from kafkacoord.storage.batch_producer import IoLoop
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import admin_client, replay_consumer
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.fold import offsets_policy
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics, ensure_topics, topic_identities

from .helpers import append_all, read_partition

pytestmark = pytest.mark.integration


def commit(offset: int, group: str = "g") -> RawRecord:
    return encode_record(OffsetCommitKey(group, "orders", 0), OffsetCommitValue(offset, "", 1))


def marker(epoch: int, node: int) -> RawRecord:
    return encode_record(ShardLeaderKey(), ShardLeaderValue(epoch, node, f"n{node}", 1))


@pytest.fixture
def offsets(bootstrap: str, prefix: str) -> str:
    topics = InternalTopics(prefix=prefix, offsets_partitions=1)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    return topics.offsets


@pytest.fixture
def shared(bootstrap: str) -> Iterator[SharedProducer]:
    producer = SharedProducer(bootstrap, "test-epoch-writer", timeout_s=10)
    yield producer
    producer.close()


def submit_and_wait(writer: LeaderEpochWriter, records: list[RawRecord]) -> list[int]:
    """Use the pipelined path the shard host uses."""
    finished = threading.Event()
    outcome: list[tuple[list[int], AppendError | None]] = []

    def done(offsets: list[int], error: AppendError | None) -> None:
        outcome.append((offsets, error))
        finished.set()

    writer.submit(records, done)
    assert finished.wait(30)
    offsets, error = outcome[0]
    if error is not None:
        raise error
    return offsets


def test_pipelined_batches_are_durable_in_order(shared: SharedProducer, offsets: str) -> None:
    writer = LeaderEpochWriter(shared, offsets, 0, epoch=1, marker=marker(1, 1))
    results: list[list[int]] = []
    finished = threading.Event()

    def done(got: list[int], error: AppendError | None) -> None:
        assert error is None
        results.append(got)
        if len(results) == 20:
            finished.set()

    for i in range(20):
        writer.submit([commit(10 * i + j) for j in range(5)], done)
    assert finished.wait(30)
    flat = [o for batch in results for o in batch]
    assert flat == list(range(1, 101))  # after the marker at 0, consecutive and in order
    writer.close()


def test_a_deposed_leader_is_fenced_and_its_late_writes_are_ignored(
    bootstrap: str, shared: SharedProducer, offsets: str, tmp_path: Path
) -> None:
    old = LeaderEpochWriter(shared, offsets, 0, epoch=1, marker=marker(1, 1))
    assert submit_and_wait(old, [commit(5)]) == [1]
    new_shared = SharedProducer(bootstrap, "test-epoch-writer-new", timeout_s=10)
    try:
        new = LeaderEpochWriter(new_shared, offsets, 0, epoch=2, marker=marker(2, 2))
        with pytest.raises(WriterFencedError, match="leader epoch 2 took over from 1"):
            submit_and_wait(old, [commit(99)])
        # Once fenced, nothing the old writer appends is reported durable.
        with pytest.raises(WriterFencedError):
            submit_and_wait(old, [commit(100)])
        assert submit_and_wait(new, [commit(7)])[0] > 2
    finally:
        new_shared.close()

    # The log holds the zombie's records; a reader ignores them.
    logged = [
        value for _, key, value in read_partition(bootstrap, offsets, 0) if key == commit(0)[0]
    ]
    assert commit(99)[1] in logged
    assert commit(100)[1] not in logged  # a fenced writer stops appending
    cache = StateCache(tmp_path / "cache")
    recovery = ShardRecovery(
        cache,
        lambda fetch_wait_ms=None: replay_consumer(
            bootstrap, "test-loader", fetch_wait_ms=fetch_wait_ms, **{"auto.offset.reset": "error"}
        ),
        offsets,
        offsets_policy(7 * 24 * 3600 * 1000),
    )
    identity = topic_identities(admin_client(bootstrap), [offsets])[offsets]
    load = recovery.recover([0], identity)[0]
    assert load.stats.fenced == 1
    stored = dict(cache.shard(ShardId(offsets, 0)).items())
    assert stored[commit(0)[0]] == commit(7)[1]


def test_foreign_records_without_a_newer_leader_do_not_fence(
    bootstrap: str, shared: SharedProducer, offsets: str
) -> None:
    writer = LeaderEpochWriter(shared, offsets, 0, epoch=3, marker=marker(3, 1))
    submit_and_wait(writer, [commit(1)])
    # Garbage and an older leader's marker land between two of our appends.
    older = encode_value(ShardLeaderValue(2, 9, "old", 1))
    append_all(
        bootstrap,
        offsets,
        [(0, b"\xff\x01garbage", b"x"), (0, encode_key(ShardLeaderKey()), older)],
    )
    got = submit_and_wait(writer, [commit(2)])
    assert got == [4]  # marker 0, commit 1, two foreign records, then ours
    writer.close()


@pytest.fixture
def two_shards(bootstrap: str, prefix: str) -> str:
    topics = InternalTopics(prefix=prefix, offsets_partitions=2)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    return topics.offsets


@pytest.mark.sources  # patches a compiled class's method on an instance
def test_a_gap_read_back_holds_only_its_own_shard(
    bootstrap: str, shared: SharedProducer, two_shards: str
) -> None:
    gapped = LeaderEpochWriter(shared, two_shards, 0, epoch=3, marker=marker(3, 1))
    other = LeaderEpochWriter(shared, two_shards, 1, epoch=3, marker=marker(3, 1))
    assert submit_and_wait(gapped, [commit(1)]) == [1]
    append_all(bootstrap, two_shards, [(0, b"\xff\x01garbage", b"x")])

    # The read-back of the gap is real, but held until the test lets it go on.
    reading, go_on = threading.Event(), threading.Event()
    read_back = gapped._newest_leader_epoch

    def held(start: int, end: int) -> int | None:
        reading.set()
        assert go_on.wait(60)
        return read_back(start, end)

    gapped._newest_leader_epoch = held  # type: ignore[method-assign]
    reported: list[tuple[str, list[int], AppendError | None]] = []
    both = threading.Event()

    def report(name: str) -> Delivered:
        def done(offsets: list[int], error: AppendError | None) -> None:
            reported.append((name, offsets, error))
            if len(reported) == 2:
                both.set()

        return done

    try:
        gapped.submit([commit(2)], report("after the gap"))
        assert reading.wait(30)
        gapped.submit([commit(3)], report("behind it"))
        # The shared session goes on reporting the other shard's batches meanwhile.
        assert submit_and_wait(other, [commit(4)]) == [1]
        assert submit_and_wait(other, [commit(5)]) == [2]
        assert reported == []
    finally:
        go_on.set()
    assert both.wait(30)
    # marker 0, commit 1, the foreign record 2, then ours, in order and durable
    assert reported == [("after the gap", [3], None), ("behind it", [4], None)]
    assert submit_and_wait(gapped, [commit(6)]) == [5]
    gapped.close()
    other.close()


def test_a_writer_on_a_loop_it_shares_never_waits_on_that_loop(
    bootstrap: str, offsets: str
) -> None:
    """As in the daemon, where the shards' appends run on the listener's loop: a wait
    there for an append would stall the very loop that reports it."""
    loop = new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    assert thread.ident is not None
    shared = SharedProducer(bootstrap, "test-shared-loop", timeout_s=10,
                            io=IoLoop.running(loop, thread.ident))  # fmt: skip
    try:
        writer = LeaderEpochWriter(shared, offsets, 0, epoch=1, marker=marker(1, 1))
        assert submit_and_wait(writer, [commit(1)]) == [1]
        seen: list[object] = []
        reported = threading.Event()

        def done(got: list[int], error: AppendError | None) -> None:
            seen.append((got, error))
            reported.set()

        def on_the_loop() -> None:
            try:
                writer.write([commit(2)])
            except RuntimeError as exc:
                seen.append(str(exc))
            writer.submit([commit(3)], done)
            started = time.monotonic()
            writer.close()  # with a batch outstanding
            seen.append(time.monotonic() - started < 1)

        loop.call_soon_threadsafe(on_the_loop)
        assert reported.wait(30)
        assert seen == [
            "a writer cannot wait for its append on its producer's thread",
            True,
            ([2], None),  # the refused write appended nothing
        ]
    finally:
        shared.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
