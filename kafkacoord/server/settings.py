"""Daemon configuration: defaults, then a TOML file, then ``KAFKACOORD_*`` env vars, then flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from kafkacoord.coordinator.controller.config import (
    COORDINATOR_ROLE,
    ControllerConfig,
    InternalTopicSpec,
)
from kafkacoord.coordinator.groups.config import GroupConfig
from kafkacoord.storage.kafka_config import Bootstrap, KafkaClientConfig, KafkaConfigError
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.wire import ClientTls, ListenerLimits

CONFIG_ENV = "KAFKACOORD_CONFIG"


class Settings(BaseSettings):
    """Every setting; the Kafka broker config each mirrors is named in its description."""

    model_config = SettingsConfigDict(env_prefix="KAFKACOORD_", extra="forbid")

    bootstrap: str | None = Field(
        None, description="Kafka bootstrap servers; unset starts the embedded broker."
    )
    kafka_config: Path | None = Field(
        None,
        description="Kafka client properties file (as Kafka's --command-config takes): "
        "security.protocol, ssl.* and sasl.* for every client of Kafka; unset: plaintext.",
    )
    node_id: int = Field(0, ge=0, description="This daemon's node id (broker.id).")
    rack: str | None = Field(None, description="This daemon's rack (broker.rack).")
    data_dir: Path = Field(Path("var/kafkacoord"), description="RocksDB cache and broker logs.")
    topic_prefix: str = Field("__kc_", min_length=1, description="Prefix of the internal topics.")
    offsets_partitions: int = Field(50, ge=1, description="offsets.topic.num.partitions")
    offsets_replication_factor: int = Field(
        3, ge=1, description="offsets.topic.replication.factor (capped at the broker count)."
    )
    offsets_segment_bytes: int = Field(104857600, ge=1, description="offsets.topic.segment.bytes")
    history_window_ms: int = Field(
        86_400_000,
        ge=0,
        description="min.compaction.lag.ms of the internal topics: how far back --as-of and "
        "explain read exactly from the log.",
    )
    offsets_retention_minutes: int = Field(10080, ge=1, description="offsets.retention.minutes")
    listen: str = Field(
        "127.0.0.1:9192",
        pattern=r"^.+:\d+$",
        description="host:port of the request listener (listeners); port 0 picks a free one.",
    )
    advertised_listener: str | None = Field(
        None,
        pattern=r"^.+:\d+$",
        description="host:port clients are told to use (advertised.listeners); default: bound.",
    )
    max_frame_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest request frame (socket.request.max.bytes)."
    )
    max_inflight_requests: int = Field(
        1000, ge=1, description="Unanswered requests per connection before reading pauses."
    )
    connections_max_idle_ms: int = Field(600_000, ge=100, description="connections.max.idle.ms")
    max_connections: int = Field(
        10_000, ge=1, description="max.connections (lowered at start to fit ulimit -n)."
    )
    request_read_timeout_ms: int = Field(
        30_000, ge=100,
        description="A request frame must arrive whole this long after its first byte, or "
        "its connection is closed (no Kafka equivalent).",
    )  # fmt: skip
    request_timeout_ms: int = Field(
        30_000, ge=100,
        description="How long a command waits for the daemon's answer before it gives up "
        "with exit code 5 (the admin tools' default.api.timeout.ms).",
    )  # fmt: skip
    tls_handshake_timeout_ms: int = Field(
        10_000, ge=100, description="A TLS handshake must finish this soon, or it is closed."
    )
    write_buffer_high_bytes: int = Field(
        1024 * 1024, ge=16 * 1024,
        description="Unsent reply bytes of a connection above which it is not read; it is "
        "read again below a quarter of them.",
    )  # fmt: skip
    max_buffered_bytes: int = Field(
        256 * 1024 * 1024, ge=1024 * 1024,
        description="Unsent replies and unread requests of all connections above which the "
        "heaviest are not read (queued.max.request.bytes, replies counted too).",
    )  # fmt: skip
    tls_cert: Path | None = Field(None, description="PEM certificate of the listener (TLS on).")
    tls_key: Path | None = Field(None, description="PEM private key of tls_cert.")
    tls_client_ca: Path | None = Field(
        None, description="CA that signs client certificates: mutual TLS (ssl.client.auth)."
    )
    tls_ca: Path | None = Field(
        None, description="CA a client trusts when it connects to a TLS listener."
    )
    admin_principals: list[str] = Field(
        default_factory=list,
        description="With mutual TLS: certificate subjects allowed to make mutating admin calls.",
    )
    node_principals: dict[str, list[Annotated[int, Field(ge=0)]]] = Field(
        default_factory=dict,
        description="With mutual TLS: the node ids each certificate subject may register and "
        "heartbeat as (Kafka's CLUSTER_ACTION, per node). Every daemon's and node agent's "
        'certificate needs its own node id here, e.g. {"CN=kc-1" = [1]}.',
    )
    allow_plaintext_admin: bool = Field(
        False,
        description="Serve node and admin calls on a listener that is not on loopback and "
        "does not authenticate clients (no tls_client_ca): anyone who reaches it may act as "
        "any node or admin. Without it such a daemon refuses to start.",
    )
    load_chunk_records: int = Field(
        200_000, ge=1, description="Records folded per atomic cache write while loading."
    )
    load_progress_interval_s: float = Field(
        2.0, gt=0, description="Seconds between load progress lines."
    )
    strict_records: bool = Field(False, description="Stop on a poison record instead of skipping.")
    broker_check_interval_ms: int = Field(
        1000, ge=50, description="How often the internal topics' ids are checked (broker loss)."
    )
    controller_session_timeout_ms: int | None = Field(
        None,
        ge=1000,
        description="Session of the controller-election group: failover time. Unset: 6000, "
        "or 2000 with an embedded broker (local, so a short lease is safe; the embedded "
        "tansu holds a new member's join for half the session).",
    )
    controller_standby: bool = Field(
        True,
        description="Follow the metadata log while not the controller (a hot standby), so a "
        "takeover loads only its tail. Costs the memory of the decoded metadata.",
    )
    node_session_timeout_ms: int = Field(9000, ge=500, description="broker.session.timeout.ms")
    node_heartbeat_interval_ms: int = Field(
        2000, ge=100, description="broker.heartbeat.interval.ms"
    )
    auto_leader_rebalance_enable: bool = Field(True, description="auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds: int = Field(
        300, ge=1, description="leader.imbalance.check.interval.seconds"
    )
    leader_imbalance_per_broker_percentage: float = Field(
        10.0, ge=0, description="leader.imbalance.per.broker.percentage"
    )
    unclean_leader_election_enable: bool = Field(
        False, description="unclean.leader.election.enable (topics may override)."
    )
    min_insync_replicas: int = Field(
        1, ge=1, description="min.insync.replicas for topics that do not set it."
    )
    eligible_leader_replicas_enable: bool = Field(
        True,
        description="KIP-966 eligible leader replicas (Kafka's eligible.leader.replicas.version): "
        "replicas leaving an ISR below min ISR stay eligible to lead cleanly.",
    )
    decision_retention_ms: int = Field(
        7 * 24 * 3600 * 1000,
        ge=0,
        description="How long the metadata log keeps a decision's record (its trigger), which "
        "explain reads; 0 keeps them for ever.",
    )
    max_concurrent_reassignments: int = Field(
        100, ge=1, description="Partitions moving at once; more are queued."
    )
    default_replication_factor: int = Field(1, ge=1, description="default.replication.factor")
    num_partitions: int = Field(1, ge=1, description="num.partitions")
    group_min_session_timeout_ms: int = Field(
        6000, ge=0, description="group.min.session.timeout.ms"
    )
    group_max_session_timeout_ms: int = Field(
        300_000, ge=0, description="group.max.session.timeout.ms"
    )
    group_initial_rebalance_delay_ms: int = Field(
        3000, ge=0, description="group.initial.rebalance.delay.ms"
    )
    group_max_size: int | None = Field(None, ge=1, description="group.max.size")
    group_consumer_session_timeout_ms: int = Field(
        45_000, ge=1, description="group.consumer.session.timeout.ms (KIP-848 members)"
    )
    group_consumer_heartbeat_interval_ms: int = Field(
        5_000, ge=1, description="group.consumer.heartbeat.interval.ms (KIP-848 members)"
    )
    group_consumer_max_size: int | None = Field(
        None, ge=1, description="group.consumer.max.size (KIP-848 groups)"
    )
    group_consumer_assignors: list[str] = Field(
        ["uniform", "range"],
        min_length=1,
        description="group.consumer.assignors: server assignors; the first is the default",
    )
    group_consumer_metadata_refresh_ms: int = Field(
        2_000, ge=100, description="How often the broker's topics are read for KIP-848 groups"
    )
    offset_metadata_max_bytes: int = Field(4096, ge=1, description="offset.metadata.max.bytes")
    offsets_retention_check_interval_ms: int = Field(
        600_000, ge=1, description="offsets.retention.check.interval.ms"
    )
    offsets_commit_timeout_ms: int = Field(5000, ge=1, description="offsets.commit.timeout.ms")
    embedded_broker_port: int | None = Field(
        None, description="Port of the embedded broker; unset reuses the last one (data_dir)."
    )
    cache_sync: bool | None = Field(
        None,
        description="Sync the cache's WAL before answering; unset: on with an embedded broker, "
        "whose data the cache is the durable copy of.",
    )
    embedded_broker: Literal["tansu", "kafka"] = Field(
        "tansu", description="Embedded broker without bootstrap: tansu (memory) or Apache Kafka."
    )
    embedded_kafka_secure: bool = Field(
        False,
        description="The embedded Apache Kafka listens SASL_SSL with SCRAM users and ACLs; "
        "client properties files are written to data_dir/kafka (needs embedded_broker=kafka).",
    )
    metrics_host: str = Field("127.0.0.1", description="Address of /metrics and /health.")
    metrics_port: int = Field(
        9464, ge=-1, le=65535, description="Port of /metrics and /health; 0 picks one, -1 disables."
    )
    console: bool = Field(
        True, description="Serve the web console on the metrics port (metrics_host only)."
    )
    console_writes: bool = Field(
        False,
        description="Let logged-in console_admins stop reassignments, reset offsets and elect "
        "leaders. Under mutual TLS the writes need console_tls_cert.",
    )
    console_lag_interval_ms: int = Field(
        5000,
        ge=100,
        description="How often the daemon samples every group's lag (the "
        "console's charts and the lag metrics).",
    )
    console_lag_samples: int = Field(
        720, ge=2, le=100_000, description="Lag samples kept per group partition (a ring)."
    )
    allowed_lag: int = Field(
        0, ge=0, description="Lag status (console, metrics): a lag this small counts as none."
    )
    lag_metrics_max_partitions: int = Field(
        10_000,
        ge=0,
        description="At most this many kafkacoord_partition_lag series; the "
        "rest are counted in kafkacoord_partition_lag_dropped.",
    )
    console_warehouse: Path | None = Field(
        None,
        description="A views warehouse (kafkacoord views run): the console's /history reads "
        "its leadership_history view, which outlives compaction, and the lag charts its "
        "lag_history view.",
    )
    console_users: dict[str, str] = Field(
        default_factory=dict,
        description="Console users: name -> argon2 hash (kafkacoord console hash-password). "
        "Without them the console is served only on a loopback metrics_host.",
    )
    console_admins: list[str] = Field(
        default_factory=list, description="The console_users who may write (console_writes)."
    )
    console_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the console answers to besides the bound address (and the "
        "loopback names on a loopback or wildcard one); others get 421 (DNS rebinding).",
    )
    console_session_max_age_s: int = Field(
        8 * 3600, ge=60, description="A console login lasts this long."
    )
    console_tls_cert: Path | None = Field(
        None,
        description="The console's own client certificate for its writes; needed under mutual "
        "TLS, and its subject must be in admin_principals.",
    )
    console_tls_key: Path | None = Field(None, description="PEM private key of console_tls_cert.")
    http_threads: int = Field(4, ge=1, le=64, description="Worker threads of the metrics port.")
    http_connection_limit: int = Field(
        100, ge=1, description="Connections the metrics port holds open at once."
    )
    http_channel_timeout_s: int = Field(
        30, ge=1, description="An idle connection to the metrics port is closed after this."
    )

    @model_validator(mode="after")
    def _console_is_whole(self) -> Settings:
        if (self.console_tls_cert is None) != (self.console_tls_key is None):
            raise ValueError("console_tls_cert and console_tls_key go together")
        unknown = sorted(set(self.console_admins) - set(self.console_users))
        if unknown:
            raise ValueError(f"console_admins not in console_users: {', '.join(unknown)}")
        return self

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["console", "json"] = "console"

    @property
    def embedded(self) -> bool:
        return self.bootstrap is None

    @property
    def controller_session_ms(self) -> int:
        if self.controller_session_timeout_ms is not None:
            return self.controller_session_timeout_ms
        return 2000 if self.embedded else 6000

    @property
    def sync_cache(self) -> bool:
        return self.embedded if self.cache_sync is None else self.cache_sync

    @model_validator(mode="after")
    def _tls_is_whole(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: set both or neither")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_cert and tls_key")
        if self.admin_principals and self.tls_client_ca is None:
            raise ValueError(
                "admin_principals needs mutual TLS (tls_client_ca): without client "
                "certificates there is no principal to check"
            )
        if self.node_principals and self.tls_client_ca is None:
            raise ValueError(
                "node_principals needs mutual TLS (tls_client_ca): without client "
                "certificates there is no principal to check"
            )
        return self

    @model_validator(mode="after")
    def _kafka_config_reads(self) -> Settings:
        self.kafka_client_config()  # a bad file is a configuration error, named at start
        return self

    def kafka_client_config(self) -> KafkaClientConfig | None:
        if self.kafka_config is None:
            return None
        try:
            return KafkaClientConfig.load(self.kafka_config)
        except KafkaConfigError as exc:
            raise ValueError(str(exc)) from exc

    def kafka_bootstrap(self, servers: str) -> Bootstrap:
        """``servers`` with this process's Kafka client config (every client reads it)."""
        return Bootstrap(servers, self.kafka_client_config())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)

    @property
    def topics(self) -> InternalTopics:
        return InternalTopics(
            prefix=self.topic_prefix,
            offsets_partitions=self.offsets_partitions,
            offsets_segment_bytes=self.offsets_segment_bytes,
            history_window_ms=self.history_window_ms,
        )

    def client_tls(self) -> ClientTls | None:
        """How this process's clients reach TLS listeners (None: plaintext)."""
        if self.tls_ca is None:
            return None
        return ClientTls(self.tls_ca, self.tls_cert, self.tls_key)

    def listener_limits(self) -> ListenerLimits:
        return ListenerLimits(
            max_frame_bytes=self.max_frame_bytes,
            max_inflight_per_connection=self.max_inflight_requests,
            connections_max_idle_ms=self.connections_max_idle_ms,
            max_connections=self.max_connections,
            request_read_timeout_ms=self.request_read_timeout_ms,
            tls_handshake_timeout_ms=self.tls_handshake_timeout_ms,
            write_buffer_high_bytes=self.write_buffer_high_bytes,
            max_buffered_bytes=self.max_buffered_bytes,
        )

    def controller_config(self) -> ControllerConfig:
        return ControllerConfig(
            node_session_timeout_ms=self.node_session_timeout_ms,
            auto_leader_rebalance_enable=self.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms=self.leader_imbalance_check_interval_seconds * 1000,
            leader_imbalance_per_broker_percentage=self.leader_imbalance_per_broker_percentage,
            max_concurrent_reassignments=self.max_concurrent_reassignments,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            default_min_insync_replicas=self.min_insync_replicas,
            eligible_leader_replicas_enable=self.eligible_leader_replicas_enable,
            decision_retention_ms=self.decision_retention_ms,
            default_num_partitions=self.num_partitions,
            default_replication_factor=self.default_replication_factor,
            # The group-coordinator shards: one logical partition per __kc_offsets partition.
            internal_topics=(
                InternalTopicSpec(
                    self.topics.offsets,
                    self.offsets_partitions,
                    self.offsets_replication_factor,
                    role=COORDINATOR_ROLE,
                ),
            ),
        )

    def group_config(self) -> GroupConfig:
        return GroupConfig(
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            max_size=self.group_max_size,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            offsets_retention_ms=self.offsets_retention_ms,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
            offsets_commit_timeout_ms=self.offsets_commit_timeout_ms,
            consumer_session_timeout_ms=self.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            consumer_max_size=self.group_consumer_max_size,
            consumer_assignors=tuple(self.group_consumer_assignors),
            consumer_metadata_refresh_ms=self.group_consumer_metadata_refresh_ms,
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from a TOML file (or ``$KAFKACOORD_CONFIG``), env vars and explicit overrides."""
    if config_file is None and os.environ.get(CONFIG_ENV):
        config_file = Path(os.environ[CONFIG_ENV])
    cls: type[Settings] = Settings
    if config_file is not None:
        if not config_file.is_file():
            raise FileNotFoundError(f"config file not found: {config_file}")
        # A subclass per file keeps the file out of global state.
        config = SettingsConfigDict(**{**Settings.model_config, "toml_file": config_file})
        cls = type("FileSettings", (Settings,), {"model_config": config})
    given = {k: v for k, v in overrides.items() if v is not None}
    return cls(**given)
