"""Loader and cache against a real broker: tombstones, checkpoints, recreation, poison."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kafkacoord.codecs import RecordType, decode_record, encode_key, encode_value
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import PATIENT_FETCH_WAITS_MS, admin_client, replay_consumer
from kafkacoord.storage.errors import BrokerUnavailableError, LoadCancelledError, PoisonRecordError
from kafkacoord.storage.fold import metadata_policy, offsets_policy
from kafkacoord.storage.reader import BEGINNING
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics, ensure_topics, topic_identities

from .helpers import append_all, expected_state, read_partition

pytestmark = pytest.mark.integration

PARTITIONS = 3
RETENTION_MS = 7 * 24 * 3600 * 1000
OFFSETS_TYPES = {RecordType.GROUP_METADATA, RecordType.OFFSET_COMMIT}


def commit(group: str, partition: int, offset: int, ts: int = 1_000) -> tuple[bytes, bytes]:
    return (
        encode_key(OffsetCommitKey(group, "orders", partition)),
        encode_value(OffsetCommitValue(offset, f"m{offset}", ts)),
    )


def workload(seed: int, count: int, keys: int) -> list[tuple[int, bytes, bytes | None]]:
    """Commits over a few keys per partition, with overwrites and tombstones."""
    rng = random.Random(seed)
    records: list[tuple[int, bytes, bytes | None]] = []
    for i in range(count):
        key, value = commit(f"g{rng.randrange(keys)}", rng.randrange(4), i)
        records.append((rng.randrange(PARTITIONS), key, None if rng.random() < 0.1 else value))
    return records


class Env:
    def __init__(self, bootstrap: str, prefix: str, tmp_path: Path, broker: str) -> None:
        self.bootstrap = bootstrap
        self.broker = broker
        self.topics = InternalTopics(prefix=prefix, offsets_partitions=PARTITIONS)
        self.admin: AdminClient = admin_client(bootstrap)
        self.identities = ensure_topics(self.admin, self.topics.specs(), replication_factor=1)
        self.cache_path = tmp_path / "cache"
        self.cache = StateCache(self.cache_path)

    def recovery(self, topic: str | None = None, **kwargs: object) -> ShardRecovery:
        topic = topic or self.topics.offsets
        policy = (
            metadata_policy() if topic == self.topics.metadata else offsets_policy(RETENTION_MS)
        )
        return ShardRecovery(
            self.cache,
            lambda fetch_wait_ms=None: replay_consumer(
                self.bootstrap,
                "test-loader",
                fetch_wait_ms=fetch_wait_ms,
                **{"auto.offset.reset": "error"},
            ),
            topic,
            policy,
            **kwargs,  # type: ignore[arg-type]
        )

    def identity(self, topic: str | None = None) -> str:
        topic = topic or self.topics.offsets
        return topic_identities(self.admin, [topic])[topic]

    def assert_matches_log(self, topic: str | None = None, partitions: int = PARTITIONS) -> None:
        topic = topic or self.topics.offsets
        for p in range(partitions):
            expected = expected_state(read_partition(self.bootstrap, topic, p), OFFSETS_TYPES)
            assert dict(self.cache.shard(ShardId(topic, p)).items()) == expected, f"{topic}-{p}"


@pytest.fixture
def env(bootstrap: str, prefix: str, tmp_path: Path, broker_kind: str) -> Env:
    return Env(bootstrap, prefix, tmp_path, broker_kind)


def test_load_replays_overwrites_and_tombstones_to_the_high_watermark(env: Env) -> None:
    records = workload(seed=1, count=3_000, keys=40)
    append_all(env.bootstrap, env.topics.offsets, records)
    loads = env.recovery(chunk_records=500).recover(range(PARTITIONS), env.identity())
    for p, load in loads.items():
        assert load.high_watermark == sum(1 for r in records if r[0] == p)
        assert load.next_offset == load.high_watermark
        assert load.stats.poison == 0
    assert sum(load.stats.records for load in loads.values()) == len(records)
    assert sum(load.stats.tombstones for load in loads.values()) > 0
    env.assert_matches_log()


def test_a_load_into_an_empty_cache_hands_over_its_state_decoded(env: Env) -> None:
    # Small chunks: keys overwritten and tombstoned across chunks must end as in the cache.
    append_all(env.bootstrap, env.topics.offsets, workload(seed=7, count=2_000, keys=30))
    loads = env.recovery(chunk_records=300).recover(range(PARTITIONS), env.identity())
    for load in loads.values():
        cached = {k: decode_record(k, v) for k, v in env.cache.shard(load.shard).items()}
        assert cached, "the workload leaves live keys in every shard"
        assert load.decoded == cached

    # From a checkpoint the load sees only a delta: it hands over nothing.
    append_all(env.bootstrap, env.topics.offsets, workload(seed=8, count=100, keys=30))
    again = env.recovery().recover(range(PARTITIONS), env.identity())
    assert all(load.decoded is None for load in again.values())


def test_restart_replays_only_from_the_checkpoint(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=2, count=2_000, keys=30))
    first = env.recovery().recover(range(PARTITIONS), env.identity())
    env.cache.close()

    delta = workload(seed=3, count=150, keys=30)
    append_all(env.bootstrap, env.topics.offsets, delta)
    env.cache = StateCache(env.cache_path)
    second = env.recovery().recover(range(PARTITIONS), env.identity())
    for p in range(PARTITIONS):
        assert second[p].start_offset == first[p].next_offset
        assert second[p].stats.records == sum(1 for r in delta if r[0] == p)
        assert second[p].rebuilt is None
    env.assert_matches_log()


def test_recreated_topic_is_detected_and_the_shard_rebuilt(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=4, count=500, keys=20))
    env.recovery().recover(range(PARTITIONS), env.identity())
    old_identity = env.identity()

    for future in env.admin.delete_topics([env.topics.offsets]).values():
        future.result()
    # Apache Kafka deletes a topic in the background: wait until it is gone.
    deadline = time.monotonic() + 30
    while env.topics.offsets in env.admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the deleted topic never went away"
        time.sleep(0.1)
    ensure_topics(env.admin, env.topics.specs(), replication_factor=1)
    assert env.identity() != old_identity
    # Fewer records than before, under new keys: nothing old may survive.
    key, value = commit("fresh", 0, 1)
    append_all(env.bootstrap, env.topics.offsets, [(0, key, value)])

    loads = env.recovery().recover(range(PARTITIONS), env.identity())
    assert all(load.rebuilt == "topic recreated (new identity)" for load in loads.values())
    assert dict(env.cache.shard(ShardId(env.topics.offsets, 0)).items()) == {key: value}
    assert env.cache.shard(ShardId(env.topics.offsets, 1)).count() == 0
    env.assert_matches_log()


def test_log_behind_the_checkpoint_triggers_a_rebuild(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=5, count=300, keys=10))
    identity = env.identity()
    env.recovery().recover(range(PARTITIONS), identity)
    store = env.cache.shard(ShardId(env.topics.offsets, 0))
    checkpoint = store.checkpoint()
    assert checkpoint is not None
    # A checkpoint past the log end (a broker that lost data under the same id).
    store.apply({}, next_offset=checkpoint.next_offset + 1_000, identity=identity)

    loads = env.recovery().recover(range(PARTITIONS), identity)
    assert loads[0].rebuilt == "log behind checkpoint"
    assert loads[0].next_offset == checkpoint.next_offset
    assert loads[1].rebuilt is None
    env.assert_matches_log()


def test_checkpoint_older_than_delete_retention_is_rebuilt(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=6, count=200, keys=10))
    env.recovery(clock_ms=lambda: 1_000).recover(range(PARTITIONS), env.identity())
    day_later = 1_000 + 24 * 3600 * 1000 + 1
    loads = env.recovery(clock_ms=lambda: day_later).recover(range(PARTITIONS), env.identity())
    assert {load.rebuilt for load in loads.values()} == {
        "checkpoint older than delete.retention.ms"
    }
    env.assert_matches_log()


def test_poison_records_are_counted_skipped_and_fatal_in_strict_mode(env: Env) -> None:
    good_key, good_value = commit("g", 0, 5)
    later_key, later_value = commit("g", 1, 6)
    node = (encode_key(NodeKey(1)), encode_value(NodeValue(1, "i", 1, False, 1, 1)))
    poison: list[tuple[int, bytes | None, bytes | None]] = [
        (0, good_key, good_value),
        (0, b"\x63\x01garbage", b"\x00\x02zz"),  # unknown record type
        (0, good_key, good_value[:-3]),  # truncated value: the previous value stands
        (0, good_key[:3], good_value),  # truncated key
        (0, None, good_value),  # no key
        (0, good_key, b"\x00\x63" + good_value[2:]),  # unknown schema version
        (0, node[0], node[1]),  # a metadata record in the offsets topic
        (0, later_key, later_value),
    ]
    if env.broker == "kafka":
        # Apache Kafka refuses a keyless record on a compacted topic (INVALID_RECORD),
        # so that poison can only reach a log on brokers that do not check (tansu).
        poison = [record for record in poison if record[1] is not None]
    append_all(env.bootstrap, env.topics.offsets, poison)

    loads = env.recovery().recover([0], env.identity())
    assert loads[0].stats.poison == (5 if env.broker == "kafka" else 6)
    assert loads[0].next_offset == len(poison)
    assert dict(env.cache.shard(ShardId(env.topics.offsets, 0)).items()) == {
        good_key: good_value,
        later_key: later_value,
    }

    strict_cache = StateCache(env.cache_path.with_name("strict"))
    strict = ShardRecovery(
        strict_cache,
        lambda fetch_wait_ms=None: replay_consumer(
            env.bootstrap, "strict", fetch_wait_ms=fetch_wait_ms, **{"auto.offset.reset": "error"}
        ),
        env.topics.offsets,
        offsets_policy(RETENTION_MS),
        strict=True,
    )
    with pytest.raises(PoisonRecordError, match=rf"{env.topics.offsets}-0@1"):
        strict.recover([0], env.identity())
    # The strict failure wrote nothing past the poison record.
    checkpoint = strict_cache.shard(ShardId(env.topics.offsets, 0)).checkpoint()
    assert checkpoint is None or checkpoint.next_offset <= 1


def node(epoch: int, rack: str) -> bytes:
    """Node 3's record as the controller of ``epoch`` writes it."""
    return encode_value(NodeValue(3, "inc", 1, False, 1, controller_epoch=epoch, rack=rack))


def controller(epoch: int) -> bytes:
    return encode_value(ControllerValue(epoch, epoch, f"inc{epoch}", epoch))


def test_metadata_replay_ignores_a_stale_controllers_late_writes(env: Env) -> None:
    topic = env.topics.metadata
    node_key = encode_key(NodeKey(3))

    records: list[tuple[int, bytes | None, bytes | None]] = [
        (0, encode_key(ControllerKey()), controller(1)),
        (0, node_key, node(1, "a")),
        (0, encode_key(ControllerKey()), controller(2)),
        (0, node_key, node(2, "b")),
        (0, node_key, node(1, "zombie")),  # late write of the epoch-1 controller
    ]
    append_all(env.bootstrap, topic, records)
    loads = env.recovery(topic).recover([0], env.identity(topic))
    assert loads[0].stats.fenced == 1
    assert env.cache.shard(ShardId(topic, 0)).get(node_key) == node(2, "b")
    assert loads[0].decoded is not None
    assert loads[0].decoded[node_key][1] == decode_record(node_key, node(2, "b"))[1]

    # The fence survives a restart: the next load starts from the cached epoch.
    append_all(env.bootstrap, topic, [(0, node_key, node(1, "zombie2"))])
    again = env.recovery(topic).recover([0], env.identity(topic))
    assert again[0].stats.fenced == 1
    assert env.cache.shard(ShardId(topic, 0)).get(node_key) == node(2, "b")


def test_empty_partitions_load_at_once(env: Env) -> None:
    loads = env.recovery().recover(range(PARTITIONS), env.identity())
    assert all(load.high_watermark == 0 and load.stats.records == 0 for load in loads.values())
    assert all(load.decoded == {} for load in loads.values())
    assert all(env.cache.shard(load.shard).checkpoint() is not None for load in loads.values())


def test_empty_partitions_are_skipped_but_never_a_partition_with_records(env: Env) -> None:
    # One batch of three records: the embedded broker lists its end as 1, not 3.
    records = [(1, *commit(f"g{i}", 0, i)) for i in range(3)]
    append_all(env.bootstrap, env.topics.offsets, records)
    loads = env.recovery().recover(range(PARTITIONS), env.identity())
    assert {p: load.high_watermark for p, load in loads.items()} == {0: 0, 1: 3, 2: 0}
    assert loads[1].stats.records == 3
    env.assert_matches_log()
    for load in loads.values():
        checkpoint = env.cache.shard(load.shard).checkpoint()
        assert checkpoint is not None and checkpoint.next_offset == load.high_watermark


def test_a_followed_shard_continues_where_it_stood(env: Env) -> None:
    first = workload(seed=11, count=1_500, keys=25)
    append_all(env.bootstrap, env.topics.offsets, first)
    recovery = env.recovery(chunk_records=200)
    tail = recovery.follow(1, env.identity())
    in_first = sum(1 for r in first if r[0] == 1)
    assert tail.load.stats.records == in_first
    assert tail.load.next_offset == tail.load.high_watermark == in_first

    # Overwrites and tombstones of keys the first pass folded.
    delta = workload(seed=12, count=600, keys=25)
    append_all(env.bootstrap, env.topics.offsets, delta)
    again = recovery.follow(1, env.identity(), tail)
    assert again.folder is tail.folder
    assert again.load.start_offset == BEGINNING  # one load, continued
    assert again.load.stats.records == sum(1 for r in delta if r[0] == 1)
    assert again.load.next_offset == in_first + again.load.stats.records
    # The decoded state spans both passes: it is the whole shard, as the cache is.
    shard = env.cache.shard(ShardId(env.topics.offsets, 1))
    assert again.load.decoded == {k: decode_record(k, v) for k, v in shard.items()}
    expected = expected_state(read_partition(env.bootstrap, env.topics.offsets, 1), OFFSETS_TYPES)
    assert dict(shard.items()) == expected

    # A pass with nothing new reads nothing and keeps it all.
    idle = recovery.follow(1, env.identity(), again)
    assert idle.load.stats.records == 0
    assert idle.load.decoded == again.load.decoded


def test_a_followed_metadata_shard_keeps_its_fence_across_passes(env: Env) -> None:
    topic = env.topics.metadata
    node_key = encode_key(NodeKey(3))

    append_all(env.bootstrap, topic, [
        (0, encode_key(ControllerKey()), controller(1)),
        (0, encode_key(ControllerKey()), controller(2)),
        (0, node_key, node(2, "b")),
    ])  # fmt: skip
    recovery = env.recovery(topic)
    tail = recovery.follow(0, env.identity(topic))
    # The epoch-1 controller's late write reaches the log after the first pass.
    append_all(env.bootstrap, topic, [(0, node_key, node(1, "zombie"))])
    tail = recovery.follow(0, env.identity(topic), tail)
    assert tail.load.stats.fenced == 1
    assert tail.load.decoded is not None
    assert tail.load.decoded[node_key][1] == decode_record(node_key, node(2, "b"))[1]
    append_all(env.bootstrap, topic, [(0, node_key, node(2, "c"))])
    tail = recovery.follow(0, env.identity(topic), tail)
    assert tail.load.stats.fenced == 0
    assert tail.load.decoded[node_key][1] == decode_record(node_key, node(2, "c"))[1]
    assert env.cache.shard(ShardId(topic, 0)).get(node_key) == node(2, "c")


def test_a_follow_whose_log_fell_behind_starts_over(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=13, count=400, keys=10))
    recovery = env.recovery()
    tail = recovery.follow(0, env.identity())
    # The tail stands past the log end (a broker that lost data under the same id).
    tail.load.next_offset += 1_000
    again = recovery.follow(0, env.identity(), tail)
    assert again.load.rebuilt == "log behind checkpoint"
    assert again.folder is not tail.folder
    shard = env.cache.shard(ShardId(env.topics.offsets, 0))
    assert again.load.decoded == {k: decode_record(k, v) for k, v in shard.items()}
    env.assert_matches_log(partitions=1)


def test_a_cancelled_follow_stops_and_leaves_a_consistent_prefix(env: Env) -> None:
    # More than one consume batch (10,000 messages), so more than one chunk.
    records = [(0, *commit(f"g{i % 10}", 0, i)) for i in range(12_000)]
    append_all(env.bootstrap, env.topics.offsets, records)
    asked = 0

    def after_the_first_chunk() -> bool:
        nonlocal asked
        asked += 1
        return asked > 1

    recovery = env.recovery(chunk_records=100)
    with pytest.raises(LoadCancelledError):
        recovery.follow(0, env.identity(), cancel=after_the_first_chunk)
    checkpoint = env.cache.shard(ShardId(env.topics.offsets, 0)).checkpoint()
    assert checkpoint is not None and 0 < checkpoint.next_offset < len(records)
    # The next load goes on from that checkpoint and ends where a whole load would.
    load = recovery.recover([0], env.identity())[0]
    assert load.start_offset == checkpoint.next_offset
    env.assert_matches_log(partitions=1)


def test_a_rebuild_of_one_shard_keeps_the_others_decoded_state(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=15, count=2_000, keys=40))
    identity = env.identity()
    env.recovery().recover([0], identity)
    store = env.cache.shard(ShardId(env.topics.offsets, 0))
    checkpoint = store.checkpoint()
    assert checkpoint is not None
    store.apply({}, next_offset=checkpoint.next_offset + 1_000, identity=identity)

    # Shard 0 restarts from the log start while shards 1 and 2 load in small chunks:
    # whatever they folded before the restart stays in the state they hand over.
    loads = env.recovery(chunk_records=50).recover(range(PARTITIONS), identity)
    assert loads[0].rebuilt == "log behind checkpoint"
    for load in loads.values():
        cached = {k: decode_record(k, v) for k, v in env.cache.shard(load.shard).items()}
        assert load.decoded == cached
    env.assert_matches_log()


def test_a_load_whose_consumer_goes_silent_reads_on_with_a_patient_one(env: Env) -> None:
    """A consumer that gets neither records nor the end of the log (here: its fetches
    wait for more bytes than the log holds) is replaced by one with a longer fetch wait;
    the load then finishes."""
    records = workload(seed=11, count=300, keys=20)
    append_all(env.bootstrap, env.topics.offsets, records)
    made: list[int | None] = []

    def consumer(fetch_wait_ms: int | None = None) -> Consumer:
        silent = not made
        made.append(fetch_wait_ms)
        waits = {"fetch.min.bytes": 100_000_000, "fetch.wait.max.ms": 300_000}
        return replay_consumer(env.bootstrap, "test-loader", fetch_wait_ms=fetch_wait_ms, **{
            "auto.offset.reset": "error", **(waits if silent else {}),
        })  # fmt: skip

    recovery = ShardRecovery(
        env.cache, consumer, env.topics.offsets, offsets_policy(RETENTION_MS), refetch_after_s=1.0
    )
    loads = recovery.recover(range(PARTITIONS), env.identity())

    assert made == [None, PATIENT_FETCH_WAITS_MS[0]]
    assert all(load.high_watermark is not None for load in loads.values())
    env.assert_matches_log()


def test_a_read_that_no_consumer_gets_further_gives_up(env: Env) -> None:
    append_all(env.bootstrap, env.topics.offsets, workload(seed=12, count=50, keys=5))
    made: list[int | None] = []

    def consumer(fetch_wait_ms: int | None = None) -> Consumer:
        made.append(fetch_wait_ms)
        return replay_consumer(env.bootstrap, "test-loader", **{
            "auto.offset.reset": "error", "fetch.min.bytes": 100_000_000,
            "fetch.wait.max.ms": 300_000,
        })  # fmt: skip

    recovery = ShardRecovery(
        env.cache, consumer, env.topics.offsets, offsets_policy(RETENTION_MS),
        refetch_after_s=0.5, stall_timeout_s=2.0,
    )  # fmt: skip
    with pytest.raises(BrokerUnavailableError, match="new consumers got no further"):
        recovery.recover(range(PARTITIONS), env.identity())
    assert made[:3] == [None, *PATIENT_FETCH_WAITS_MS]  # longer waits before giving up


def test_a_load_whose_fetches_find_nothing_within_their_wait_reads_on(env: Env) -> None:
    """Found by the fault campaign on tansu: the broker lists a partition's stored batches
    from its start within the fetch's wait and answers with what it found by then, and
    it never compacts; once a shard's partition held tens of thousands of batches (one a
    group commit) the loader's 10 ms wait found no records, and every load of the shard
    sat at one offset. A wait of 0 finds nothing on any partition there, so this needs
    no large one. The load now moves to a consumer with a longer wait."""
    batches = 2_000
    producer = Producer({"bootstrap.servers": env.bootstrap, "acks": "all",
                         "batch.num.messages": 1, "linger.ms": 0})  # fmt: skip
    for i in range(batches):
        key, value = commit(f"g{i % 100}", i % 4, i)
        producer.produce(env.topics.offsets, value, key, partition=0)
    assert producer.flush(60) == 0
    made: list[int | None] = []

    def consumer(fetch_wait_ms: int | None = None) -> Consumer:
        made.append(fetch_wait_ms)
        wait = 0 if fetch_wait_ms is None else fetch_wait_ms
        return replay_consumer(env.bootstrap, "test-loader", fetch_wait_ms=wait,
                               **{"auto.offset.reset": "error"})  # fmt: skip

    recovery = ShardRecovery(
        env.cache, consumer, env.topics.offsets, offsets_policy(RETENTION_MS), refetch_after_s=2.0
    )
    loads = recovery.recover([0], env.identity())

    assert loads[0].high_watermark == batches
    env.assert_matches_log(partitions=1)
    # tansu answered the zero wait with no records; Apache Kafka answers with what it has.
    assert made == ([None, PATIENT_FETCH_WAITS_MS[0]] if env.broker == "tansu" else [None])
