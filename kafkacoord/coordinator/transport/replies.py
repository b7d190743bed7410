"""The answering side's producer: replies go to each caller's responses partition."""

from __future__ import annotations

from collections.abc import Iterable

import structlog
from confluent_kafka import KafkaException

from kafkacoord.storage.clients import durable_producer

from ..runtime.shard import Reply
from .envelope import encode_reply

log = structlog.get_logger(__name__)


class ReplySender:
    """Thread-safe. Replies are best effort: a lost one makes the caller resend."""

    def __init__(self, bootstrap: str, topic: str, *, client_id: str) -> None:
        self.topic = topic
        self._producer = durable_producer(bootstrap, client_id, linger_ms=0.5)
        self.sent = 0

    def send(self, replies: Iterable[Reply]) -> None:
        for reply in replies:
            key, value = encode_reply(reply)
            try:
                self._producer.produce(self.topic, value, key, reply.to.reply_partition)
                self.sent += 1
            except (BufferError, KafkaException) as exc:
                log.warning("reply not sent", api=reply.api, client=reply.to.client_id,
                            error=str(exc))  # fmt: skip
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(5)
