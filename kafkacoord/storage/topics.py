"""The internal topics: their specs, creation, and verification of existing ones."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from .errors import TopicConfigError

log = structlog.get_logger(__name__)

T = TypeVar("T")

COMPACT = "compact"
RETIRED = ("group_requests", "controller_requests", "responses")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    # A compacted topic holds state; its partition count can never change.
    fixed_partitions: bool = True

    @property
    def cleanup_policy(self) -> str:
        return self.configs.get("cleanup.policy", "delete")


@dataclass(frozen=True, slots=True)
class InternalTopics:
    """Names and specs of kafkacoord's two topics under one prefix.

    Requests travel over direct connections to the daemons, not over topics. Older
    releases also created ``<prefix>group_requests``, ``<prefix>controller_requests``
    and ``<prefix>responses``; nothing reads them any more (see :data:`RETIRED`).
    """

    prefix: str = "__kc_"
    offsets_partitions: int = 50
    offsets_segment_bytes: int = 100 * 1024 * 1024
    # min.compaction.lag.ms of both: every record is kept this long, so any instant
    # within it can be read back exactly (docs/operations.md#history).
    history_window_ms: int = 24 * 60 * 60 * 1000

    @property
    def metadata(self) -> str:
        return f"{self.prefix}metadata"

    @property
    def offsets(self) -> str:
        return f"{self.prefix}offsets"

    @property
    def retired(self) -> list[str]:
        """Topics of the old request path, safe to delete once every daemon is upgraded."""
        return [f"{self.prefix}{name}" for name in RETIRED]

    def _window(self) -> dict[str, str]:
        return {HISTORY_WINDOW: str(self.history_window_ms)}

    def specs(self) -> list[TopicSpec]:
        return [
            TopicSpec(self.metadata, 1, {"cleanup.policy": COMPACT, **self._window()}),
            TopicSpec(
                self.offsets,
                self.offsets_partitions,
                {
                    "cleanup.policy": COMPACT,
                    "segment.bytes": str(self.offsets_segment_bytes),
                    "compression.type": "uncompressed",
                    **self._window(),
                },
            ),
        ]


HISTORY_WINDOW = "min.compaction.lag.ms"

# Kafka's default delete.retention.ms: one day.
KAFKA_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000


def ensure_topics(
    admin: AdminClient,
    specs: Iterable[TopicSpec],
    *,
    replication_factor: int,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """Create missing topics, verify existing ones; return each topic's identity.

    A topic whose cleanup policy or partition count is wrong raises
    :class:`TopicConfigError` naming the topic and the fix. Nothing is altered.
    """
    specs = list(specs)
    existing = admin.list_topics(timeout=timeout_s).topics
    missing = [s for s in specs if s.name not in existing]
    if missing:
        _create(admin, missing, replication_factor, timeout_s)
    present = [s for s in specs if s.name in existing]
    if present:
        _verify(
            admin, present, {s.name: len(existing[s.name].partitions) for s in present}, timeout_s
        )
    return topic_identities(admin, [s.name for s in specs], timeout_s)


def _create(admin: AdminClient, specs: list[TopicSpec], rf: int, timeout_s: float) -> None:
    new = [NewTopic(s.name, s.partitions, rf, config=dict(s.configs)) for s in specs]
    for name, future in admin.create_topics(new, request_timeout=timeout_s).items():
        try:
            future.result()
            log.info("created internal topic", topic=name, replication_factor=rf)
        except KafkaException as exc:
            # Another daemon may have won the race; verification below covers it.
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _verify(admin, specs, _partition_counts(admin, [s.name for s in specs], timeout_s), timeout_s)


def _partition_counts(admin: AdminClient, names: list[str], timeout_s: float) -> dict[str, int]:
    topics = admin.list_topics(timeout=timeout_s).topics
    return {n: len(topics[n].partitions) for n in names if n in topics}


def _warn_short_window(spec: TopicSpec, entries: Mapping[str, Any]) -> None:
    """A window shorter than configured shortens history; kafkacoord serves on."""
    wanted, entry = spec.configs.get(HISTORY_WINDOW), entries.get(HISTORY_WINDOW)
    if wanted is None or entry is None or entry.value is None or int(entry.value) >= int(wanted):
        return
    log.warning(
        "internal topic keeps history for less than history_window_ms",
        topic=spec.name, min_compaction_lag_ms=entry.value, history_window_ms=wanted,
        fix=f"kafka-configs --alter --entity-type topics --entity-name {spec.name} "
        f"--add-config {HISTORY_WINDOW}={wanted}",
    )  # fmt: skip


def _verify(
    admin: AdminClient, specs: list[TopicSpec], partitions: Mapping[str, int], timeout_s: float
) -> None:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, s.name) for s in specs]
    configs = _until_known(
        lambda: {
            res.name: future.result()
            for res, future in admin.describe_configs(resources, request_timeout=timeout_s).items()
        },
        timeout_s,
    )
    problems: list[str] = []
    for spec in specs:
        entries = configs.get(spec.name, {})
        # Brokers that return only explicitly set configs imply Kafka's default, delete.
        policy = entries["cleanup.policy"].value if "cleanup.policy" in entries else "delete"
        if set(policy.split(",")) != set(spec.cleanup_policy.split(",")):
            problems.append(
                f"topic {spec.name!r} has cleanup.policy={policy} but needs "
                f"{spec.cleanup_policy}. Fix: kafka-configs --alter --entity-type topics "
                f"--entity-name {spec.name} --add-config cleanup.policy={spec.cleanup_policy}"
            )
        _warn_short_window(spec, entries)
        count = partitions.get(spec.name)
        if count is not None and spec.fixed_partitions and count != spec.partitions:
            problems.append(
                f"topic {spec.name!r} has {count} partitions but kafkacoord is configured for "
                f"{spec.partitions}. Groups and requests hash onto the partition count, so it "
                f"cannot change: set the partition setting to {count}, or delete the topic "
                f"(losing its state) to recreate it"
            )
    if problems:
        raise TopicConfigError("; ".join(problems))


def delete_retention(
    admin: AdminClient, names: list[str], timeout_s: float = 30.0
) -> dict[str, int]:
    """Each topic's ``delete.retention.ms``: how long its tombstones outlive a cleaning.

    A warm cache older than this may have missed a tombstone for good, so recovery
    must know the topic's own value, not an assumed default. A broker that reports no
    value keeps Kafka's default.
    """
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    configs = _until_known(
        lambda: {
            res.name: future.result()
            for res, future in admin.describe_configs(resources, request_timeout=timeout_s).items()
        },
        timeout_s,
    )
    found: dict[str, int] = {}
    for name in names:
        entry = configs.get(name, {}).get("delete.retention.ms")
        value = None if entry is None else entry.value
        found[name] = int(value) if value not in (None, "") else KAFKA_DELETE_RETENTION_MS
    return found


def topic_identities(
    admin: AdminClient, names: list[str], timeout_s: float = 30.0
) -> dict[str, str]:
    """Topic ids; a topic deleted and recreated gets a new one."""

    def identities() -> dict[str, str]:
        described = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
        return {name: str(future.result().topic_id) for name, future in described.items()}

    return _until_known(identities, timeout_s)


def _until_known(call: Callable[[], T], timeout_s: float) -> T:
    """Retry while the broker does not know a topic yet: on Apache Kafka a topic just
    created (or deleted and created again) reaches every broker's metadata a moment later.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
        time.sleep(0.1)
