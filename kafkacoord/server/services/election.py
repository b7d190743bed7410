"""Who is the active controller: the member of a Kafka consumer group that owns partition 0.

Every daemon joins the group ``<prefix>controller`` on the metadata topic (the
technique faust and Karapace use). The member assigned partition 0 activates;
losing it (revocation, or a lost session) deactivates. The partition is paused
at once: the group is only a lease, the data is read elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafkacoord.storage.clients import base_config, close_after
from kafkacoord.threads import spawn

log = structlog.get_logger(__name__)


class ControllerElection:
    """The election lease: a consumer-group membership whose partition 0 names the controller."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group_id: str,
        *,
        client_id: str,
        on_elected: Callable[[], None],
        on_lost: Callable[[], None],
        session_timeout_ms: int = 6000,
        heartbeat_interval_ms: int = 500,
    ) -> None:
        self.topic = topic
        self.active = False
        # Set once the group has given this member an assignment, maybe an empty one.
        self.joined = False
        self._on_elected = on_elected
        self._on_lost = on_lost
        self._closing = threading.Event()
        self._consumer = Consumer(
            base_config(
                bootstrap,
                client_id,
                **{
                    "group.id": group_id,
                    "enable.auto.commit": False,
                    "session.timeout.ms": session_timeout_ms,
                    "heartbeat.interval.ms": heartbeat_interval_ms,
                    # The rebalance timeout: a member that vanished mid-rebalance (a consumer
                    # of a broker's previous life, say) holds the election up this long at most.
                    "max.poll.interval.ms": max(session_timeout_ms, 10_000),
                    # Sticky: the holder keeps partition 0 when a daemon (re)joins; with
                    # range the lowest member id would take it back, an extra failover.
                    "partition.assignment.strategy": "cooperative-sticky",
                },
            )
        )
        self._consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._thread = spawn(client_id, self._serve)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.joined = True
        if partitions:
            consumer.pause(partitions)
        if any(p.partition == 0 for p in partitions) and not self.active:
            self.active = True
            log.info("elected active controller", group=self.topic)
            self._on_elected()

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.partition == 0 for p in partitions) and self.active:
            self.active = False
            log.info("no longer the active controller")
            self._on_lost()

    def _serve(self) -> None:
        last_error: str | None = None
        while not self._closing.is_set():
            try:
                msg = self._consumer.poll(0.1)
            except (KafkaException, RuntimeError):
                if self._closing.is_set():
                    return
                log.exception("controller election poll failed")
                continue
            error = None if msg is None else msg.error()
            # A group the broker refuses (a session timeout below its floor, say) would
            # otherwise leave the cluster without a controller and no word why.
            if error is not None and error.str() != last_error:
                last_error = error.str()
                log.error("controller election group error", group=self.topic, error=last_error,
                          fatal=error.fatal())  # fmt: skip

    def close(self) -> None:
        """Leave the group at once, so a standby takes over without a session timeout."""
        self._closing.set()
        self._thread.join(timeout=5)
        if self.active:
            self.active = False
            self._on_lost()
        close_after(self._thread, self._consumer)
