"""Loads over logs that Apache Kafka's log cleaner has really compacted.

Apache Kafka only: tansu never compacts, so nothing here could happen on it. The
broker is forced to clean at once (short segments, a tiny dirty ratio, a short
cleaner back-off and tombstone retention), and every test waits for the cleaner to
have visibly removed records before it loads.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.codecs import RecordType, encode_key, encode_value
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import replay_consumer
from kafkacoord.storage.fold import FoldPolicy, metadata_policy, offsets_policy
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import COMPACT, InternalTopics, topic_identities

from .cluster import fast_daemon_env, start_daemon, wait_until
from .helpers import append_all, expected_state, read_partition
from .storm import Acknowledged, check
from .storm import storm as run_storm

pytestmark = pytest.mark.integration

RETENTION_MS = 7 * 24 * 3600 * 1000
DELETE_RETENTION_MS = 100
# Cleaned within moments: segments rolled every 100 ms, any dirt worth cleaning.
EAGER_CLEANING = {
    "cleanup.policy": COMPACT,
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
    "max.compaction.lag.ms": "100",
    "min.compaction.lag.ms": "0",
}
CLEANER_DEADLINE_S = 90

Record = tuple[int, bytes | None, bytes | None]


@pytest.fixture(scope="module")
def cleaning_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An Apache Kafka broker whose log cleaner looks for work every 100 ms."""
    properties = {"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "100"}
    with KafkaBroker(tmp_path_factory.mktemp("cleaning"), properties=properties) as broker:
        yield broker.bootstrap


def _topic(bootstrap: str, name: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=EAGER_CLEANING)])[name].result(30)
    return admin


def _commit(group: int, offset: int) -> tuple[bytes, bytes]:
    key = encode_key(OffsetCommitKey(f"g{group}", "orders", 0))
    return key, encode_value(OffsetCommitValue(offset, "", 1_000))


def _offsets_filler(n: int) -> tuple[bytes, bytes]:
    return _commit(10_000, n)  # a key of its own, overwritten each time


def _metadata_filler(n: int) -> tuple[bytes, bytes]:
    value = NodeValue(9_999, f"f{n}", n, False, 1, controller_epoch=5)
    return encode_key(NodeKey(9_999)), encode_value(value)


def _wait_cleaned(
    bootstrap: str, topic: str, written: list[Record], done: Callable[[list[Record]], bool],
    filler: Callable[[int], tuple[bytes, bytes]] = _offsets_filler,
) -> list[Record]:  # fmt: skip
    """Append a record now and then (a segment only rolls, and so becomes cleanable, when
    something follows it) until ``done(log)`` holds for the log as read back."""
    count = 0
    deadline = time.monotonic() + CLEANER_DEADLINE_S
    while True:
        log = read_partition(bootstrap, topic, 0)
        if done(log):
            return log
        assert time.monotonic() < deadline, f"the cleaner did not clean {topic} in time"
        count += 1
        key, value = filler(count)
        append_all(bootstrap, topic, [(0, key, value)])
        written.append((0, key, value))
        time.sleep(0.2)


def _load(bootstrap: str, cache: StateCache, topic: str, policy: FoldPolicy) -> ShardRecovery:
    return ShardRecovery(
        cache,
        lambda fetch_wait_ms=None: replay_consumer(
            bootstrap, "compaction-loader", fetch_wait_ms=fetch_wait_ms,
            **{"auto.offset.reset": "error"},
        ),
        topic, policy, delete_retention_ms=DELETE_RETENTION_MS,
    )  # fmt: skip


def test_a_load_of_a_compacted_offsets_log_equals_the_fold_of_the_whole_log(
    cleaning_kafka: str, prefix: str, tmp_path: Path
) -> None:
    topic = f"{prefix}offsets"
    admin = _topic(cleaning_kafka, topic)
    rng = random.Random(11)
    written: list[Record] = []
    for batch in range(5):
        records: list[Record] = []
        for i in range(400):
            key, value = _commit(rng.randrange(30), batch * 1000 + i)
            records.append((0, key, None if rng.random() < 0.1 else value))
        append_all(cleaning_kafka, topic, records)
        written.extend(records)
    expected_before = expected_state(written, {RecordType.OFFSET_COMMIT})

    log = _wait_cleaned(cleaning_kafka, topic, written, lambda log: len(log) < len(written) // 4)
    offsets = [offset for offset, _, _ in log]
    assert offsets != list(range(len(offsets))), "compaction leaves gaps in the offsets"
    print(f"{topic}: {len(written)} records written, {len(log)} left after cleaning")

    identity = topic_identities(admin, [topic])[topic]
    with StateCache(tmp_path / "cache") as cache:
        load = _load(cleaning_kafka, cache, topic, offsets_policy(RETENTION_MS))
        loaded = load.recover([0], identity)[0]
        assert loaded.next_offset == log[-1][0] + 1
        state = dict(cache.shard(ShardId(topic, 0)).items())
    # The fold of everything ever written, fillers included, is what the shard holds.
    assert state == expected_state(written, {RecordType.OFFSET_COMMIT})
    assert {k: v for k, v in state.items() if k in expected_before} == expected_before


def test_a_load_of_a_compacted_metadata_log_keeps_the_newest_controllers_decisions(
    cleaning_kafka: str, prefix: str, tmp_path: Path
) -> None:
    topic = f"{prefix}metadata"
    admin = _topic(cleaning_kafka, topic)
    controller = encode_key(ControllerKey())
    written: list[Record] = []
    for epoch in range(1, 6):
        records: list[Record] = [
            (0, controller, encode_value(ControllerValue(epoch, 1, "c", epoch)))
        ]
        for node in range(1, 40):
            value = NodeValue(node, f"i{epoch}", epoch, False, 1, controller_epoch=epoch)
            records.append((0, encode_key(NodeKey(node)), encode_value(value)))
        if epoch == 5:
            records += [(0, encode_key(NodeKey(node)), None) for node in range(30, 40)]
        append_all(cleaning_kafka, topic, records)
        written.extend(records)

    def cleaned(log: list[Record]) -> bool:
        return sum(1 for _, key, _ in log if key == controller) == 1

    log = _wait_cleaned(cleaning_kafka, topic, written, cleaned, _metadata_filler)
    print(f"{topic}: {len(written)} records written, {len(log)} left after cleaning")
    identity = topic_identities(admin, [topic])[topic]
    with StateCache(tmp_path / "cache") as cache:
        _load(cleaning_kafka, cache, topic, metadata_policy()).recover([0], identity)
        state = dict(cache.shard(ShardId(topic, 0)).items())
    assert state == expected_state(written, {RecordType.CONTROLLER, RecordType.NODE})
    assert encode_key(NodeKey(35)) not in state and encode_key(NodeKey(5)) in state


def test_a_warm_cache_older_than_delete_retention_does_not_resurrect_deleted_keys(
    cleaning_kafka: str, prefix: str, tmp_path: Path
) -> None:
    topic = f"{prefix}offsets"
    admin = _topic(cleaning_kafka, topic)
    doomed_key, doomed_value = _commit(1, 1)
    kept_key, kept_value = _commit(2, 2)
    written: list[Record] = [(0, doomed_key, doomed_value), (0, kept_key, kept_value)]
    append_all(cleaning_kafka, topic, written)
    identity = topic_identities(admin, [topic])[topic]
    with StateCache(tmp_path / "cache") as cache:
        policy = offsets_policy(RETENTION_MS)
        _load(cleaning_kafka, cache, topic, policy).recover([0], identity)
        assert doomed_key in dict(cache.shard(ShardId(topic, 0)).items())

        # While this cache is "offline", the group is deleted and its tombstone cleaned away.
        append_all(cleaning_kafka, topic, [(0, doomed_key, None)])
        written.append((0, doomed_key, None))

        def tombstone_gone(log: list[Record]) -> bool:
            return all(key != doomed_key for _, key, _ in log)

        _wait_cleaned(cleaning_kafka, topic, written, tombstone_gone)
        loaded = _load(cleaning_kafka, cache, topic, policy).recover([0], identity)[0]
        assert loaded.rebuilt is not None, "an old checkpoint must not be trusted"
        state = dict(cache.shard(ShardId(topic, 0)).items())
    assert doomed_key not in state
    assert state[kept_key] == kept_value


def test_a_kill_storm_while_the_cleaner_runs_loses_nothing_acknowledged(
    cleaning_kafka: str, prefix: str, tmp_path: Path
) -> None:
    """Commits and topic creations, the daemon killed -9 three times, the cleaner compacting
    the internal topics all along: every acknowledged write is there after each restart."""
    node, topics = 7, InternalTopics(prefix=prefix, offsets_partitions=4)
    admin = AdminClient({"bootstrap.servers": cleaning_kafka})
    created = admin.create_topics([
        NewTopic(spec.name, spec.partitions, 1, config={**spec.configs, **EAGER_CLEANING})
        for spec in topics.specs()
    ])  # fmt: skip
    for future in created.values():
        future.result(30)
    env = fast_daemon_env(cleaning_kafka, prefix, topics.offsets_partitions)
    acked = Acknowledged()
    daemon = start_daemon(env, tmp_path, node)
    try:
        for round_ in range(3):
            daemon.wait_for("node registered", timeout_s=120)
            stop = threading.Event()
            args = (cleaning_kafka, topics, node, acked, stop, round_)
            storm = threading.Thread(target=run_storm, args=args)
            storm.start()
            time.sleep(3)
            daemon.kill()
            stop.set()
            storm.join(60)
            daemon = start_daemon(env, tmp_path, node)
            check(cleaning_kafka, topics, node, acked)
    finally:
        daemon.stop()
    assert acked.offsets and acked.topics, "the storm acknowledged nothing"

    def cleaned() -> bool:
        # Fewer commits left in the log than were acknowledged: the cleaner dropped the
        # overwritten ones while the daemons came and went.
        left = sum(
            1
            for p in range(topics.offsets_partitions)
            for _, key, _ in read_partition(cleaning_kafka, topics.offsets, p)
            if key is not None and key[:1] == bytes((RecordType.OFFSET_COMMIT,))
        )
        return left < acked.commits

    wait_until(cleaned, timeout_s=CLEANER_DEADLINE_S, what="the cleaner to compact the storm")
