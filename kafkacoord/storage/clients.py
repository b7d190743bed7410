"""Configuration of the librdkafka clients kafkacoord uses."""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from .broker_profile import broker_profile
from .errors import BrokerUnavailableError
from .kafka_config import client_config_of

# Large fetches make replay several times faster than librdkafka's defaults.
_REPLAY_CONSUMER = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
    "queued.min.messages": 500_000,
    "fetch.wait.max.ms": 10,
}


# Some brokers (tansu) answer a waiting fetch only when its wait ends, not when data
# arrives, so the wait bounds how late a tailing reader sees a record; every fetch also
# costs the broker CPU. There, background tails (metadata followers) poll every 50 ms;
# Apache Kafka wakes a parked fetch on data, so they wait as long as Kafka's default.
BACKGROUND_FETCH_WAIT_MS = 50
KAFKA_FETCH_WAIT_MS = 500
# The fetch waits of the consumers that follow a stalled one. tansu lists a partition's
# stored batches from its start within the fetch's wait and answers with what it found
# by then: past some tens of thousands of batches (it never compacts) a 10 or 50 ms wait
# finds nothing, and every fetch comes back empty with a later log end.
PATIENT_FETCH_WAITS_MS = (1_000, 5_000)
# The fetch wait of reads whose partitions all hold a record at the fetch position (end
# probes, planned ranges): no such fetch parks, so the wait only bounds that listing. At
# 10 ms a fetch of fifty long partitions left some out of every answer while writes went on.
RECORDS_AHEAD_FETCH_WAIT_MS = 500


# The controller's transaction.timeout.ms. A controller killed mid-transaction holds
# the metadata log's last stable offset until the broker aborts that transaction: this
# long, plus the broker's sweep (transaction.abort.timed.out.transaction.cleanup.interval.ms,
# 10 s). Readers of committed records must outwait it (reader.py's stall timeout).
CONTROLLER_TRANSACTION_TIMEOUT_MS = 60_000


def background_fetch_wait_ms(bootstrap: str) -> int:
    """How long a background tail's fetch may wait at ``bootstrap``'s broker."""
    if broker_profile(bootstrap).fetch_wakes_on_data:
        return KAFKA_FETCH_WAIT_MS
    return BACKGROUND_FETCH_WAIT_MS


def polling_consumer(fetch_wait_ms: int) -> dict[str, int]:
    return {"fetch.wait.max.ms": fetch_wait_ms, "fetch.error.backoff.ms": 20}


def poll_batch(consumer: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    """Wait for the first message only: ``consume(n, t)`` would wait out ``t`` for n of them."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_messages - 1, 0)]


def base_config(bootstrap: str, client_id: str, **extra: Any) -> dict[str, Any]:
    """Every librdkafka client's settings: the one place a client learns its cluster's
    security settings, from the :class:`~.kafka_config.Bootstrap` it is given."""
    security = client_config_of(bootstrap)
    # librdkafka's own log lines join the daemon's structured log.
    return {
        **({} if security is None else security.librdkafka()),
        "bootstrap.servers": str(bootstrap),
        "client.id": client_id,
        "logger": logging.getLogger("librdkafka"),
        # A topic appears only when kafkacoord creates it, with its configs. On a broker
        # that lost its topics an auto-created one also gives librdkafka a second new
        # topic id to swap in, and that swap has crashed it (librdkafka #4964).
        "allow.auto.create.topics": False,
        **extra,
    }


def admin_client(bootstrap: str, client_id: str = "kafkacoord-admin") -> AdminClient:
    return AdminClient(base_config(bootstrap, client_id))


def durable_producer(bootstrap: str, client_id: str, *, linger_ms: float, **extra: Any) -> Producer:
    """Idempotent, ``acks=all``: nothing is acknowledged before every ISR member has it."""
    return Producer(
        base_config(
            bootstrap,
            client_id,
            **{
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": linger_ms,
                "compression.type": "none",
                "batch.num.messages": 10_000,
                **extra,
            },
        )
    )


def replay_consumer(
    bootstrap: str, client_id: str, *, fetch_wait_ms: int | None = None, **extra: Any
) -> Consumer:
    """A consumer for assign-only replay: no group membership, no commits, EOF events on.

    ``fetch_wait_ms`` replaces the short fetch wait, for a broker that needs longer to
    find the records (see :mod:`.recovery`)."""
    if fetch_wait_ms is not None:
        extra["fetch.wait.max.ms"] = fetch_wait_ms
    return Consumer(
        base_config(
            bootstrap,
            client_id,
            **{
                # librdkafka wants a group id even for assign-only use; no group is joined.
                "group.id": f"{client_id}-replay",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                **_REPLAY_CONSUMER,
                **extra,
            },
        )
    )


def broker_count(admin: AdminClient, bootstrap: str, timeout_s: float = 10.0) -> int:
    """Number of brokers, or a clear error when the cluster can't be reached."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            f"cannot reach Kafka at {bootstrap!r} within {timeout_s}s ({exc}). "
            "Check KAFKACOORD_BOOTSTRAP, or unset it to run on the embedded broker."
        ) from exc
    return len(metadata.brokers)


def close_after(thread: threading.Thread, consumer: Consumer, timeout_s: float = 5.0) -> None:
    """Close ``consumer`` once ``thread``, which polls it, has stopped.

    librdkafka crashes the process when a consumer is closed during a poll on
    another thread, so a thread that does not stop in time keeps its consumer.
    """
    if thread.is_alive() and thread is not threading.current_thread():
        thread.join(timeout_s)
    if thread.is_alive() and thread is not threading.current_thread():
        logging.getLogger(__name__).warning(
            "consumer left open: its polling thread %s did not stop", thread.name
        )
        return
    consumer.close()
