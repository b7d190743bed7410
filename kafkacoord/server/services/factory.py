"""Builds the daemon's services from settings: the clients, recoveries and writers each
one needs. The services' constructors only keep what they are given, so a test or a
benchmark can hand them other parts."""

from __future__ import annotations

from collections.abc import Callable

from kafkacoord.coordinator.controller.config import ControllerConfig
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.coordinator.runtime.driven import Processor
from kafkacoord.coordinator.runtime.epoch_writer import SharedProducer
from kafkacoord.coordinator.runtime.observer import HostObserver
from kafkacoord.coordinator.runtime.processor import ShardProcessor
from kafkacoord.coordinator.runtime.writer import TransactionalWriter
from kafkacoord.server.settings import Settings
from kafkacoord.storage.batch_producer import IoLoop
from kafkacoord.storage.cache import StateCache
from kafkacoord.storage.clients import admin_client, replay_consumer
from kafkacoord.storage.fold import FoldPolicy, metadata_policy, offsets_policy
from kafkacoord.storage.recovery import DEFAULT_DELETE_RETENTION_MS, ShardRecovery

from .controller import STANDBY_INTERVAL_S, ControllerService
from .election import ControllerElection
from .groups import GroupService
from .topic_metadata import TopicWatcher

__all__ = ["controller_processor", "controller_service", "group_service"]

IdentityProbe = Callable[[str], str | None]
"""The broker's id for a topic now (None when it has none): a reload checks it."""


def controller_service(
    settings: Settings,
    bootstrap: str,
    cache: StateCache,
    identity: str,
    *,
    config: ControllerConfig,
    endpoint: str | None = None,
    incarnation: str | None = None,
    on_change: Callable[[bool], None] | None = None,
    observer: HostObserver | None = None,
    identity_probe: IdentityProbe | None = None,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    processor: Processor | None = None,
) -> ControllerService:
    """The controller service, not yet started; its shard is driven by ``processor``
    (default: a thread of its own, as a controller step waits for its transaction)."""
    topics = settings.topics
    name = f"kafkacoord-{settings.node_id}"

    def make_election(
        on_elected: Callable[[], None], on_lost: Callable[[], None]
    ) -> ControllerElection:
        # One election group per life of the metadata topic: consumers of a broker's
        # previous life that rejoined the old group can never hold this election up.
        return ControllerElection(
            bootstrap, topics.metadata, f"{topics.prefix}controller-{identity}",
            client_id=f"{name}-elect", on_elected=on_elected, on_lost=on_lost,
            session_timeout_ms=settings.controller_session_ms,
        )  # fmt: skip

    return ControllerService(
        settings, config, cache=cache, identity=identity,
        recovery=_recovery(settings, bootstrap, cache, client_id=f"{name}-controller-loader",
                           topic=topics.metadata, policy=metadata_policy(),
                           identity_probe=identity_probe, delete_retention_ms=delete_retention_ms),
        make_writer=lambda: TransactionalWriter(
            bootstrap, topics.metadata, 0, transactional_id=f"{topics.prefix}controller"
        ),
        make_election=make_election, processor=processor or controller_processor(),
        endpoint=endpoint, incarnation=incarnation,
        on_change=on_change, observer=observer,
        standby_interval_s=STANDBY_INTERVAL_S if settings.controller_standby else None,
    )  # fmt: skip


def controller_processor() -> ShardProcessor:
    """The controller shard's processor: a thread that drives only it. At most 2000
    events a turn: one controller transaction carries at most that many requests' records."""
    return ShardProcessor("controller-shard", max_batch=2000)


def group_service(
    settings: Settings,
    bootstrap: str,
    cache: StateCache,
    identity: str,
    *,
    config: GroupConfig,
    processor: Processor | None = None,
    appends_loop: IoLoop | None = None,
    observer: HostObserver | None = None,
    identity_probe: IdentityProbe | None = None,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    warm_interval_s: float = 2.0,
) -> GroupService:
    """The group service, not yet started; its shards share ``processor`` (default: a
    thread of their own), and their appends' connections run on ``appends_loop``
    (default: a thread of their own)."""
    name = f"kafkacoord-{settings.node_id}"
    topic = settings.topics.offsets
    return GroupService(
        settings, config, cache=cache, identity=identity,
        appends=SharedProducer(bootstrap, f"{name}-offsets", io=appends_loop,
                               timeout_s=config.offsets_commit_timeout_ms / 1000),
        recovery=_recovery(settings, bootstrap, cache, client_id=f"{name}-groups-loader",
                           topic=topic, policy=offsets_policy(settings.offsets_retention_ms),
                           identity_probe=identity_probe, delete_retention_ms=delete_retention_ms),
        processor=processor or ShardProcessor("group-shards"),
        observer=observer, warm_interval_s=warm_interval_s,
        topic_watcher=lambda on_change: TopicWatcher(
            admin_client(bootstrap, f"{name}-topics"),
            hidden=hidden_topics(settings),
            on_change=on_change, interval_s=config.consumer_metadata_refresh_ms / 1000,
        ),
    )  # fmt: skip


_KAFKA_INTERNAL = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"}
)


def hidden_topics(settings: Settings) -> Callable[[str], bool]:
    """Topics no consumer group subscribes to: kafkacoord's and Kafka's internal ones."""
    hidden = _KAFKA_INTERNAL | {settings.topics.metadata, settings.topics.offsets}
    return hidden.__contains__


def _recovery(
    settings: Settings,
    bootstrap: str,
    cache: StateCache,
    *,
    client_id: str,
    topic: str,
    policy: FoldPolicy,
    identity_probe: IdentityProbe | None,
    delete_retention_ms: int,
) -> ShardRecovery:
    return ShardRecovery(
        cache,
        lambda fetch_wait_ms=None: replay_consumer(
            bootstrap, client_id, fetch_wait_ms=fetch_wait_ms,
            **{"auto.offset.reset": "error", "isolation.level": "read_committed"},
        ),
        topic, policy, strict=settings.strict_records, chunk_records=settings.load_chunk_records,
        delete_retention_ms=delete_retention_ms,
        # A load from a broker that lost the topic must not mix into the old cache.
        identity_probe=None if identity_probe is None else lambda: identity_probe(topic),
    )  # fmt: skip
