"""P1: loading one offsets shard into the RocksDB cache, against a naive replay.

Writes N offset-commit records (about --keys distinct keys, with overwrites
and tombstones) to one partition, then measures in the same run:

- raw_rate:  consume every record and decode every key and value with fastavro
- load_rate: the real loader (ShardRecovery) into a fresh RocksDB cache
- warm_restart_s: reopen the cache after 1,000 more records and catch up

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from benchlib import BROKERS, broker_for
from confluent_kafka import KafkaError, Producer, TopicPartition

from kafkacoord.codecs import decode_record, encode_key, encode_value
from kafkacoord.codecs.models import OffsetCommitKey, OffsetCommitValue
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import admin_client, replay_consumer
from kafkacoord.storage.fold import offsets_policy
from kafkacoord.storage.recovery import ShardRecovery
from kafkacoord.storage.topics import InternalTopics, ensure_topics

RETENTION_MS = 7 * 24 * 3600 * 1000
TIME_LIMIT_S = 600


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def produce(
    bootstrap: str, topic: str, count: int, keys: list[bytes], seed: int
) -> dict[bytes, bytes | None]:
    """Write ``count`` records; return the last value per key (the expected end state)."""
    rng = random.Random(seed)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "batch.size": 1_000_000,
        }
    )
    last: dict[bytes, bytes | None] = {}
    deadline = time.monotonic() + TIME_LIMIT_S
    for i in range(count):
        key = keys[rng.randrange(len(keys))]
        value = (
            None
            if rng.random() < 0.05
            else encode_value(OffsetCommitValue(i, "", 1_700_000_000_000 + i, leader_epoch=1))
        )
        last[key] = value
        while True:
            try:
                producer.produce(topic, value, key, 0)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("producing took too long") from None
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records left undelivered")
    return last


def naive_replay(bootstrap: str, topic: str) -> tuple[int, float]:
    """Consume to the end, decoding every key and value: the baseline."""
    consumer = replay_consumer(bootstrap, "bench-naive")
    consumer.assign([TopicPartition(topic, 0, 0)])
    count = 0
    started = time.perf_counter()
    deadline = time.monotonic() + TIME_LIMIT_S
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return count, time.perf_counter() - started
                    raise RuntimeError(err.str())
                decode_record(msg.key(), msg.value())
                count += 1
        raise TimeoutError("naive replay did not reach the end")
    finally:
        consumer.close()


def recovery(cache: StateCache, bootstrap: str, topic: str) -> ShardRecovery:
    return ShardRecovery(
        cache,
        lambda fetch_wait_ms=None: replay_consumer(
            bootstrap, "bench-loader", fetch_wait_ms=fetch_wait_ms, **{"auto.offset.reset": "error"}
        ),
        topic,
        offsets_policy(RETENTION_MS),
    )


def run(bootstrap: str, records: int, distinct: int) -> dict[str, float | int]:
    topics = InternalTopics(prefix=f"bench{random.randrange(10**6)}_", offsets_partitions=1)
    admin = admin_client(bootstrap)
    identity = ensure_topics(admin, topics.specs(), replication_factor=1)[topics.offsets]
    keys = [
        encode_key(OffsetCommitKey(f"group-{i // 100}", "events", i % 100)) for i in range(distinct)
    ]

    log(f"writing {records:,} records over {distinct:,} keys")
    started = time.perf_counter()
    expected = produce(bootstrap, topics.offsets, records, keys, seed=1)
    log(f"  wrote in {time.perf_counter() - started:.1f}s")

    count, naive_s = naive_replay(bootstrap, topics.offsets)
    assert count == records, f"naive replay saw {count} records, wrote {records}"
    raw_rate = records / naive_s
    log(f"naive replay: {raw_rate:,.0f} records/s")

    with tempfile.TemporaryDirectory(prefix="kc-bench-") as tmp:
        path = Path(tmp) / "cache"
        with StateCache(path) as cache:
            started = time.perf_counter()
            loads = recovery(cache, bootstrap, topics.offsets).recover([0], identity)
            load_s = time.perf_counter() - started
            store = cache.shard(ShardId(topics.offsets, 0))
            live = {k: v for k, v in expected.items() if v is not None}
            assert loads[0].stats.records == records
            assert dict(store.items()) == live, "loaded state differs from the log's end state"
        load_rate = records / load_s
        log(f"loader: {load_rate:,.0f} records/s ({len(live):,} live keys)")

        more = produce(bootstrap, topics.offsets, 1_000, keys, seed=2)
        expected.update(more)
        started = time.perf_counter()
        with StateCache(path) as cache:
            loads = recovery(cache, bootstrap, topics.offsets).recover([0], identity)
            warm_s = time.perf_counter() - started
            assert loads[0].stats.records == 1_000, loads[0]
            store = cache.shard(ShardId(topics.offsets, 0))
            assert dict(store.items()) == {k: v for k, v in expected.items() if v is not None}
        log(f"warm restart: {warm_s:.3f}s for 1,000 new records")

    return {
        "records": records,
        "raw_rate": round(raw_rate),
        "load_rate": round(load_rate),
        "ratio": round(load_rate / raw_rate, 3),
        "warm_restart_s": round(warm_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--bootstrap", help="existing cluster; default: an embedded broker")
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    args = parser.parse_args()
    if args.bootstrap:
        result = run(args.bootstrap, args.records, args.keys)
    else:
        with (
            tempfile.TemporaryDirectory(prefix="kc-broker-") as tmp,
            broker_for(args.broker, Path(tmp)) as broker,
        ):
            result = run(broker.bootstrap, args.records, args.keys)
    print(json.dumps({"broker": "external" if args.bootstrap else args.broker, **result}),
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
