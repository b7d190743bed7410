"""Re-seed a fresh embedded broker from the cache.

The embedded tansu broker keeps its log in memory only, so in embedded mode the
daemon's RocksDB cache (synced writes) is the durable copy of the internal
topics. When the daemon starts a new, empty broker, every cached shard of the
previous topic identity is written back: each live key's latest record, in the
order of the old log, so a fold of the new log equals the cache. Deleted keys
(tombstones folded away) stay deleted, and the records' bytes, epochs included,
are unchanged. Then the shard is rewritten in the cache at its new offsets, in
one batch, so a crash leaves the old shard (and the next start re-seeds again)
or the new one.

The embedded Apache Kafka keeps its log on disk, so its topics keep their ids and
no shard is stale: there this only acts if the broker's log dir was lost.

Never used against a cluster the daemon does not own: there a recreated topic
means data loss, and the cache is rebuilt from the log instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import structlog
from confluent_kafka import KafkaError, Message, Producer

from .cache import Entry, ShardId, StateCache
from .clients import durable_producer
from .errors import AppendError
from .watermarks import log_end_offsets

log = structlog.get_logger(__name__)


@dataclass
class ReseedStats:
    shards: int = 0
    records: int = 0
    seconds: float = 0.0
    skipped: dict[str, str] = field(default_factory=dict)
    """Shards left alone, with why."""


def stale_shards(cache: StateCache, identities: Mapping[str, str]) -> list[ShardId]:
    """Cached shards of the internal topics whose checkpoint names another topic identity."""
    stale = []
    for shard in cache.shards():
        identity = identities.get(shard.topic)
        checkpoint = cache.shard(shard).checkpoint()
        if identity is not None and checkpoint is not None and checkpoint.identity != identity:
            stale.append(shard)
    return stale


def reseed(
    cache: StateCache,
    bootstrap: str,
    identities: Mapping[str, str],
    partitions: Mapping[str, int],
    *,
    client_id: str = "kafkacoord-reseed",
    timeout_s: float = 60.0,
) -> ReseedStats:
    """Write every stale cached shard into its empty partition of the new topic."""
    started = time.monotonic()
    stats = ReseedStats()
    shards = stale_shards(cache, identities)
    if not shards:
        return stats
    targets = [s for s in shards if s.partition < partitions.get(s.topic, 0)]
    for shard in shards:
        if shard not in targets:
            stats.skipped[str(shard)] = "partition no longer exists"
    ends = log_end_offsets(
        bootstrap, [(s.topic, s.partition) for s in targets], timeout_s=timeout_s
    )
    producer = durable_producer(bootstrap, client_id, linger_ms=5)
    try:
        for shard in targets:
            if ends[(shard.topic, shard.partition)] != 0:
                # Someone wrote first: the log, not the cache, is the truth now.
                stats.skipped[str(shard)] = "partition not empty"
                continue
            store = cache.shard(shard)
            entries = store.entries()
            offsets = _produce(producer, shard, entries, timeout_s)
            moved = [
                Entry(e.key, e.value, offset, e.expires_at)
                for e, offset in zip(entries, offsets, strict=True)
            ]
            next_offset = offsets[-1] + 1 if offsets else 0
            store.rewrite(moved, next_offset=next_offset, identity=identities[shard.topic])
            stats.shards += 1
            stats.records += len(entries)
    finally:
        producer.flush(timeout_s)
    stats.seconds = time.monotonic() - started
    for name, reason in stats.skipped.items():
        log.warning("shard not re-seeded; it will be rebuilt from the log", shard=name,
                    reason=reason)  # fmt: skip
    return stats


def _produce(
    producer: Producer, shard: ShardId, entries: list[Entry], timeout_s: float
) -> list[int]:
    """Append ``entries`` in order (acks=all, idempotent) and return their new offsets."""
    offsets = [-1] * len(entries)
    errors: list[str] = []

    def delivered(index: int) -> Callable[[KafkaError | None, Message], None]:
        def callback(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                offsets[index] = cast(int, msg.offset())

        return callback

    for index, entry in enumerate(entries):
        while True:
            try:
                producer.produce(shard.topic, entry.value, entry.key, shard.partition,
                                 on_delivery=delivered(index))  # fmt: skip
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(timeout_s)
    if errors or remaining:
        reason = errors[0] if errors else f"{remaining} records unacknowledged after {timeout_s}s"
        raise AppendError(f"re-seed of {shard} failed: {reason}", retriable=True)
    return offsets
