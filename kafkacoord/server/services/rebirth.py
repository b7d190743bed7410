"""Starting over on a broker that lost kafkacoord's topics: fresh topics, an empty cache.

Between the broker's restart and the moment each daemon notices, clients of
the previous life (heartbeats, replies, requests) may already have produced to
the vanished topics, and a broker with ``auto.create.topics.enable`` creates
them with its defaults: the wrong partition count or cleanup policy. Such a
topic holds nothing worth keeping, so it is deleted and created again; a topic
that still has the id loaded before the loss is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from kafkacoord.storage.cache import StateCache
from kafkacoord.storage.errors import TopicConfigError
from kafkacoord.storage.topics import TopicSpec, ensure_topics

from .watchdog import TopicIdentityProbe

log = structlog.get_logger(__name__)


def recreate_topics(
    admin: AdminClient,
    probe: TopicIdentityProbe,
    specs: Iterable[TopicSpec],
    *,
    replication_factor: int,
    previous: Mapping[str, str],
    attempts: int = 10,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """:func:`ensure_topics`, deleting and recreating topics auto-created since the loss."""
    specs = list(specs)
    for _ in range(attempts):
        identities: dict[str, str] = {}
        bad: list[TopicSpec] = []
        for spec in specs:
            try:
                identities.update(
                    ensure_topics(admin, [spec], replication_factor=replication_factor,
                                  timeout_s=timeout_s)
                )  # fmt: skip
            except TopicConfigError:
                bad.append(spec)
        # A topic that may grow passes verification with too few partitions; clients
        # hash onto the configured count, so a short auto-created one is bad too.
        counts = _partition_counts(admin, timeout_s)
        bad += [s for s in specs if s not in bad and counts.get(s.name, 0) < s.partitions]
        if not bad:
            return identities
        current = probe.identities(s.name for s in bad)
        kept = [s.name for s in bad if current[s.name] is not None
                and current[s.name] == previous.get(s.name)]  # fmt: skip
        if kept:
            raise TopicConfigError(f"topics {kept} of the previous broker life are misconfigured")
        names = [s.name for s in bad]
        log.warning("deleting internal topics created with broker defaults", topics=names)
        for name, future in admin.delete_topics(names, request_timeout=timeout_s).items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                log.debug("topic already gone", topic=name)
        time.sleep(0.2)  # let the deletion settle before the next create
    raise TopicConfigError(
        f"could not recreate the internal topics after {attempts} attempts: clients keep "
        "auto-creating them; set auto.create.topics.enable=false on the broker"
    )


def _partition_counts(admin: AdminClient, timeout_s: float) -> dict[str, int]:
    return {n: len(t.partitions) for n, t in admin.list_topics(timeout=timeout_s).topics.items()}


def wipe_cache(cache: StateCache, topics: Iterable[str]) -> int:
    """Drop every cached shard of ``topics``, checkpoints included; returns how many."""
    names = set(topics)
    wiped = 0
    for shard in cache.shards():
        if shard.topic in names:
            cache.shard(shard).clear()
            wiped += 1
    return wiped


__all__ = ["recreate_topics", "wipe_cache"]
