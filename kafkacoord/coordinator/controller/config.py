"""Configuration of the controller shard (Kafka's broker settings it mirrors are named)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError

__all__ = [
    "COORDINATOR_ROLE",
    "MIN_INSYNC_REPLICAS",
    "UNCLEAN_LEADER_ELECTION",
    "ControllerConfig",
    "InternalTopicSpec",
    "validate_topic_configs",
]

COORDINATOR_ROLE = "coordinator"
"""The role a kafkacoord daemon registers with: it may host group-coordinator shards."""

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"


def _frozen(configs: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(configs))


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """A logical topic the controller creates and keeps replicated by itself.

    Its replicas may only live on nodes that registered with ``role``. It is created as
    soon as one such node is live, with ``min(replication_factor, such nodes)`` replicas,
    and its replication grows towards ``replication_factor`` as more such nodes arrive.
    Unclean leader election is always on: its data lives in Kafka, so any replica can
    load it.
    """

    name: str
    partitions: int
    replication_factor: int = 3
    role: str = COORDINATOR_ROLE
    # Read-only after construction; not part of the hash (a mapping is not hashable).
    configs: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.partitions <= 0:
            raise ValueError(f"internal topic {self.name!r}: partitions must be > 0")
        if self.replication_factor <= 0:
            raise ValueError(f"internal topic {self.name!r}: replication_factor must be > 0")
        object.__setattr__(
            self, "configs", _frozen({**self.configs, UNCLEAN_LEADER_ELECTION: "true"})
        )


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The controller's settings, each named after the Kafka setting it mirrors."""

    # Kafka's broker.session.timeout.ms: a node silent for this long is fenced.
    node_session_timeout_ms: int = 9000
    # Decision records older than this are tombstoned (no Kafka equivalent); 0 keeps them.
    decision_retention_ms: int = 7 * 24 * 3600 * 1000
    # auto.leader.rebalance.enable and leader.imbalance.check.interval.seconds (in ms).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    # leader.imbalance.per.broker.percentage
    leader_imbalance_per_broker_percentage: float = 10.0
    # One rebalance run elects at most this many leaders, then continues after a short
    # pause so a big imbalance never blocks the controller for long.
    max_rebalance_elections_per_run: int = 1000
    rebalance_continue_delay_ms: int = 100
    # A fencing appends the new leaders first and answers; the ISRs the node only followed
    # in shrink after, this many partitions per append.
    fence_isr_shrink_batch: int = 50_000
    # Partitions moving at once; further reassignments are queued (persisted, step QUEUED).
    max_concurrent_reassignments: int = 100
    # unclean.leader.election.enable, for topics that do not set it.
    unclean_leader_election_enable: bool = False
    # num.partitions / default.replication.factor for CreateTopic with -1.
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    # min.insync.replicas for topics that do not set it: the size below which replicas
    # leaving the ISR become eligible leader replicas.
    default_min_insync_replicas: int = 1
    # Kafka's eligible.leader.replicas.version feature (KIP-966), on for new clusters as in
    # Kafka 4.1: the ISR may shrink to empty and its leavers stay eligible to lead.
    eligible_leader_replicas_enable: bool = True
    # A deleted topic's records are tombstoned this long after it was queued for deletion.
    topic_deletion_delay_ms: int = 0
    internal_topics: tuple[InternalTopicSpec, ...] = ()
    # Hold Python's cyclic GC off while a handler runs (see kafkacoord/gc_pause.py): a failover
    # batch must not pay for a full collection over the whole image.
    pause_gc_in_handlers: bool = True

    def __post_init__(self) -> None:
        positive = {
            "node_session_timeout_ms": self.node_session_timeout_ms,
            "leader_imbalance_check_interval_ms": self.leader_imbalance_check_interval_ms,
            "max_rebalance_elections_per_run": self.max_rebalance_elections_per_run,
            "max_concurrent_reassignments": self.max_concurrent_reassignments,
            "fence_isr_shrink_batch": self.fence_isr_shrink_batch,
            "default_num_partitions": self.default_num_partitions,
            "default_replication_factor": self.default_replication_factor,
            "default_min_insync_replicas": self.default_min_insync_replicas,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"{name} must be > 0 (got {value})")
        if self.rebalance_continue_delay_ms < 0 or self.topic_deletion_delay_ms < 0:
            raise ValueError("delays must be >= 0")
        names = [spec.name for spec in self.internal_topics]
        if len(names) != len(set(names)):
            raise ValueError(f"internal topic names must be unique (got {names})")
        object.__setattr__(self, "internal_topics", tuple(self.internal_topics))

    def topic_config_defaults(self) -> dict[str, str]:
        """The topic configs the controller acts on, with the value a topic that does not
        set them gets (Kafka's DEFAULT_CONFIG for DescribeConfigs)."""
        return {
            MIN_INSYNC_REPLICAS: str(self.default_min_insync_replicas),
            UNCLEAN_LEADER_ELECTION: str(self.unclean_leader_election_enable).lower(),
        }

    def internal_topic(self, name: str) -> InternalTopicSpec | None:
        return next((spec for spec in self.internal_topics if spec.name == name), None)


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """The topic configs the controller acts on must parse; others pass through."""
    raw = configs.get(MIN_INSYNC_REPLICAS)
    if raw is not None:
        try:
            valid = int(raw) >= 1
        except ValueError:
            valid = False
        if not valid:
            raise ProtocolError(
                ErrorCode.INVALID_CONFIG,
                f"{MIN_INSYNC_REPLICAS} must be an integer >= 1 (got {raw!r})",
            )
    raw = configs.get(UNCLEAN_LEADER_ELECTION)
    if raw is not None and raw.strip().lower() not in ("true", "false"):
        raise ProtocolError(
            ErrorCode.INVALID_CONFIG,
            f"{UNCLEAN_LEADER_ELECTION} must be true or false (got {raw!r})",
        )
