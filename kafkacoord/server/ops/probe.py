"""Whether the broker answers, asked at most once per ``ttl_s``.

A metadata request with a short timeout: health checks come often, from several
probes, and must neither hammer the broker nor hang while it is down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kafkacoord.storage.clients import admin_client


class BrokerProbe:
    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kafkacoord-health",
        timeout_s: float = 2.0,
        ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap = bootstrap
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._clock = clock
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._reachable = False

    def reachable(self) -> bool:
        # One probe at a time; concurrent callers get its answer.
        with self._lock:
            now = self._clock()
            if self._checked_at is None or now - self._checked_at >= self._ttl_s:
                self._reachable = self._ask()
                self._checked_at = self._clock()
            return self._reachable

    def _ask(self) -> bool:
        if self._admin is None:
            self._admin = admin_client(self.bootstrap, self._client_id)
        try:
            # The cluster, not its topics: topic metadata held across a broker that
            # lost its topics is what trips librdkafka (a recreated topic's new id).
            cluster = self._admin.describe_cluster(request_timeout=self._timeout_s).result()
        except KafkaException:
            return False
        return bool(cluster.nodes)


__all__ = ["BrokerProbe"]
