"""Log end offsets that are right on every broker.

ListOffsets(latest) is wrong on the embedded broker for multi-record batches (it
answers the last batch's base offset + 1, docs/architecture.md#high-watermark), but
it never overshoots, and its fetch responses carry the exact high watermark. So: ask
ListOffsets, then fetch from one record before ``max(listed, hint)``; the first
fetch response that returns a record (or reports partition EOF) carries a high
watermark covering every record acknowledged before the call, and that is the end.
Waiting for partition EOF instead never ends under a steady write load on the
embedded broker: its fetch responses report a high watermark ahead of the records
they can return yet, so the fetch position never meets it. ``hint`` is an end seen
before; if it is past the log (a truncated or recreated topic) the embedded broker
answers nothing at all, so such partitions are fetched again from the listed
offset. On Apache Kafka (:mod:`.broker_profile`) ListOffsets is exact and the fetch
is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from .broker_profile import broker_profile
from .clients import RECORDS_AHEAD_FETCH_WAIT_MS, base_config
from .errors import BrokerUnavailableError

TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


class MissingTopicError(BrokerUnavailableError):
    """A topic the source was asked to read does not exist."""


def probe_consumer(bootstrap: str, client_id: str, kafka: Mapping[str, str]) -> Consumer:
    return Consumer(
        base_config(
            bootstrap,
            client_id,
            **{
                "group.id": f"{client_id}-probe",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                # Before the log start (retention) jump to the end: EOF is the answer.
                "auto.offset.reset": "latest",
                # Every partition fetched has a record at the fetch position.
                "fetch.wait.max.ms": RECORDS_AHEAD_FETCH_WAIT_MS,
                **kafka,
            },
        )
    )


class EndOffsetProbe:
    """Partitions, earliest and latest offsets of topics; one consumer, reused."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kafkacoord-offsets",
        kafka: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        hint_wait_s: float = 2.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._kafka = dict(kafka or {})
        self._timeout_s = timeout_s
        self._hint_wait_s = hint_wait_s
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(base_config(self._bootstrap, self._client_id, **self._kafka))
        return self._admin

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = probe_consumer(self._bootstrap, self._client_id, self._kafka)
        return self._consumer

    def partitions(
        self, topics: Iterable[str], *, missing_ok: bool = False
    ) -> list[TopicPartitionKey]:
        try:
            metadata = self.admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"cannot reach Kafka at {self._bootstrap!r}: {exc}"
            ) from exc
        found: list[TopicPartitionKey] = []
        for topic in topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                if missing_ok:
                    continue
                raise MissingTopicError(
                    f"topic {topic!r} does not exist at {self._bootstrap}; start the daemon "
                    "(it creates the internal topics) or check the prefix"
                )
            found.extend((topic, p) for p in sorted(described.partitions))
        return found

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> Offsets:
        return self._list(tps, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def latest(
        self, tps: Iterable[TopicPartitionKey], hints: Mapping[TopicPartitionKey, int] | None = None
    ) -> Offsets:
        tps = list(tps)
        if not tps:
            return {}
        listed = self._list(tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        if broker_profile(self._bootstrap).exact_list_offsets:
            return listed  # the fetch below exists for the embedded broker's undercount
        hints = hints or {}
        starts = {tp: max(listed[tp], hints.get(tp, 0)) for tp in tps}
        # Nothing listed and nothing seen: an empty log (a fetch there would park).
        ends = {tp: 0 for tp, start in starts.items() if start == 0}
        wanted = {tp: start for tp, start in starts.items() if start > 0}
        if wanted:
            ends.update(self._fetch_ends(wanted, self._hint_wait_s if hints else self._timeout_s))
        # A hint past a recreated, now empty log: the listed 0 is the end.
        ends.update({tp: 0 for tp in tps if tp not in ends and listed[tp] == 0})
        retry = {tp: listed[tp] for tp in tps if tp not in ends}
        if retry:
            ends.update(self._fetch_ends(retry, self._timeout_s))
        missing = sorted(tp for tp in tps if tp not in ends)
        if missing:
            raise BrokerUnavailableError(
                f"no fetch answered for {missing} within {self._timeout_s}s; is the broker up?"
            )
        return ends

    def _list(self, tps: Iterable[TopicPartitionKey], spec: OffsetSpec) -> Offsets:
        request = {TopicPartition(t, p): spec for t, p in tps}
        if not request:
            return {}
        try:
            futures = self.admin.list_offsets(request, request_timeout=self._timeout_s)
            return {
                (tp.topic, tp.partition): max(0, int(f.result().offset))
                for tp, f in futures.items()
            }
        except KafkaException as exc:
            raise BrokerUnavailableError(f"ListOffsets failed at {self._bootstrap}: {exc}") from exc

    def _fetch_ends(self, starts: Mapping[TopicPartitionKey, int], wait_s: float) -> Offsets:
        """Each partition's high watermark from a fetch response received during this call."""
        consumer = self.consumer
        # One record before the start: the first response returns it (it exists), so it
        # has a watermark newer than the call, even if later records are not readable yet.
        consumer.assign([TopicPartition(t, p, max(0, o - 1)) for (t, p), o in starts.items()])
        ends: Offsets = {}
        answered: dict[TopicPartitionKey, int] = {}
        deadline = time.monotonic() + wait_s
        try:
            while len(ends) + len(answered) < len(starts) and time.monotonic() < deadline:
                # consume() waits for the full count or the timeout: one event per partition.
                for msg in consumer.consume(len(starts) - len(ends) - len(answered), 0.05):
                    tp = (cast(str, msg.topic()), cast(int, msg.partition()))
                    err = msg.error()
                    if err is None:
                        if tp not in ends:
                            answered[tp] = max(answered.get(tp, 0), cast(int, msg.offset()) + 1)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        ends[tp] = max(cast(int, msg.offset()), answered.pop(tp, 0))
                    elif err.fatal() or not err.retriable():
                        raise BrokerUnavailableError(f"reading {tp}: {err.str()}")
            for (topic, partition), seen in answered.items():
                # Read after the record's event: its response's watermark is cached by then.
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
                ends[(topic, partition)] = max(seen, high)
        finally:
            consumer.unassign()
        return ends

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None

    def __enter__(self) -> EndOffsetProbe:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def log_end_offsets(
    bootstrap: str, partitions: Iterable[TopicPartitionKey], *, timeout_s: float = 30.0
) -> Offsets:
    """End offsets of ``partitions`` in one call (a probe opened and closed)."""
    with EndOffsetProbe(bootstrap, timeout_s=timeout_s) as probe:
        return probe.latest(sorted(set(partitions)))
