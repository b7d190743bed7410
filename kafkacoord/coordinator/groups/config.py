"""The group coordinator's settings, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Everything a :class:`~kafkacoord.coordinator.groups.shard.GroupShard` needs to know.

    Times are in milliseconds. Each field names the Kafka broker setting it mirrors.
    """

    min_session_timeout_ms: int = 6_000
    """``group.min.session.timeout.ms``: JoinGroup below it gets INVALID_SESSION_TIMEOUT."""
    max_session_timeout_ms: int = 300_000
    """``group.max.session.timeout.ms`` (Kafka 3.x+ defaults to 1800000)."""
    initial_rebalance_delay_ms: int = 3_000
    """``group.initial.rebalance.delay.ms``: how long an Empty group waits for more members."""
    max_size: int | None = None
    """``group.max.size``; ``None`` is Kafka's default of Integer.MAX_VALUE (unbounded)."""
    new_member_join_timeout_ms: int = 300_000
    """Kafka's fixed 5-minute timeout on a new member's parked JoinGroup (it has no session
    yet, so only this bounds a client that gave up while parked)."""
    offset_metadata_max_bytes: int = 4_096
    """``offset.metadata.max.bytes``: longer commit metadata gets OFFSET_METADATA_TOO_LARGE."""
    offsets_retention_ms: int = 10_080 * 60_000
    """``offsets.retention.minutes`` (7 days) in milliseconds."""
    offsets_retention_check_interval_ms: int = 600_000
    """``offsets.retention.check.interval.ms``: period of the expiration timer."""
    offsets_commit_timeout_ms: int = 5_000
    """``offsets.commit.timeout.ms``: used by the runtime to bound the durable append of a
    commit; the shard itself never waits."""

    consumer_session_timeout_ms: int = 45_000
    """``group.consumer.session.timeout.ms``: a KIP-848 member silent this long is removed."""

    consumer_heartbeat_interval_ms: int = 5_000
    """``group.consumer.heartbeat.interval.ms``: how often KIP-848 members heartbeat."""

    consumer_max_size: int | None = None
    """``group.consumer.max.size``; ``None`` is unbounded."""

    consumer_metadata_refresh_ms: int = 2_000
    """How often the daemon reads the broker's topics for consumer groups' subscriptions
    (Kafka's coordinator learns them from its metadata image)."""

    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """``group.consumer.assignors``: the server assignors members may ask for; the first is
    the default."""

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms < 0 or self.max_session_timeout_ms < 0:
            raise ValueError("session timeout bounds must not be negative")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError(
                f"group.min.session.timeout.ms ({self.min_session_timeout_ms}) is greater than "
                f"group.max.session.timeout.ms ({self.max_session_timeout_ms})"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.max_size is not None and self.max_size < 1:
            raise ValueError(f"group.max.size must be at least 1, got {self.max_size}")
        if self.consumer_max_size is not None and self.consumer_max_size < 1:
            raise ValueError(
                f"group.consumer.max.size must be at least 1, got {self.consumer_max_size}"
            )
        if not self.consumer_assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        from .assignors.server import SERVER_ASSIGNORS

        unknown = [a for a in self.consumer_assignors if a not in SERVER_ASSIGNORS]
        if unknown:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor(s) {', '.join(unknown)}; "
                f"known: {', '.join(SERVER_ASSIGNORS)}"
            )
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms"
            )
        for name in (
            "consumer_session_timeout_ms",
            "consumer_metadata_refresh_ms",
            "consumer_heartbeat_interval_ms",
            "new_member_join_timeout_ms",
            "offset_metadata_max_bytes",
            "offsets_retention_ms",
            "offsets_retention_check_interval_ms",
            "offsets_commit_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
