"""Notices that the broker lost kafkacoord's topics, so no state of its previous life is served.

A ``memory://`` broker that restarts comes back empty; a topic deleted and
recreated comes back under a new topic id. Either way the cache and every
loaded shard describe a log that no longer exists. The watchdog compares the
internal topics' ids, as the broker reports them now, with the ids the daemon
loaded, and reports the first difference (a new id, or a topic gone). While the
broker cannot be reached it checks more often, so a restart is seen as soon as
the broker answers again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicCollection

from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.errors import BrokerUnavailableError
from kafkacoord.threads import spawn

log = structlog.get_logger(__name__)


class TopicIdentityProbe:
    """Asks the broker for the current ids of topics."""

    def __init__(self, bootstrap: str, *, client_id: str, timeout_s: float = 5.0) -> None:
        self._admin = admin_client(bootstrap, client_id)
        self._timeout_s = timeout_s

    def identities(self, topics: Iterable[str]) -> dict[str, str | None]:
        """Each topic's id, ``None`` for a topic the broker does not have.

        Raises :class:`BrokerUnavailableError` when the broker does not answer.
        """
        names = list(topics)
        try:
            described = self._admin.describe_topics(
                TopicCollection(names), request_timeout=self._timeout_s
            )
        except KafkaException as exc:
            raise BrokerUnavailableError(f"describing {names}: {exc}") from exc
        found: dict[str, str | None] = {}
        for name, future in described.items():
            try:
                found[name] = str(future.result().topic_id)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise BrokerUnavailableError(f"describing {name}: {exc}") from exc
                found[name] = None
        return found

    def identity(self, topic: str) -> str | None:
        return self.identities([topic])[topic]


@dataclass(frozen=True, slots=True)
class IdentityChange:
    topic: str
    loaded: str
    current: str | None
    """The id the broker reports now; ``None``: the topic is gone."""


class BrokerWatchdog:
    """Calls ``on_change`` once, from its own thread, when a loaded topic's id changes."""

    def __init__(
        self,
        probe: TopicIdentityProbe,
        loaded: Mapping[str, str],
        on_change: Callable[[list[IdentityChange]], None],
        *,
        interval_s: float = 1.0,
        unreachable_interval_s: float = 0.2,
    ) -> None:
        self.loaded = dict(loaded)
        self.reachable = True
        self._probe = probe
        self._on_change = on_change
        self._interval_s = interval_s
        self._unreachable_interval_s = min(unreachable_interval_s, interval_s)
        self._closing = threading.Event()
        self._thread = spawn("broker-watchdog", self._run, start=False)

    def start(self) -> BrokerWatchdog:
        self._thread.start()
        return self

    def check(self) -> list[IdentityChange]:
        """The loaded topics whose id differs now; raises when the broker does not answer."""
        current = self._probe.identities(self.loaded)
        return [
            IdentityChange(topic, loaded, current[topic])
            for topic, loaded in self.loaded.items()
            if current[topic] != loaded
        ]

    def _run(self) -> None:
        while not self._closing.wait(
            self._interval_s if self.reachable else self._unreachable_interval_s
        ):
            try:
                changes = self.check()
            except BrokerUnavailableError as exc:
                if self.reachable:
                    log.warning("broker unreachable; watching for a restart", error=str(exc))
                self.reachable = False
                continue
            self.reachable = True
            if changes:
                self._on_change(changes)
                return

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


__all__ = ["BrokerWatchdog", "IdentityChange", "TopicIdentityProbe"]
