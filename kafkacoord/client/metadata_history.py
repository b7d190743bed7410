"""The cluster's metadata as of an instant, and one partition's history, read from the log.

The internal topics keep every record for ``min.compaction.lag.ms`` (kafkacoord's
``history_window_ms``): Kafka's cleaner builds its key map only from records older
than that, so a key's last value at or before any instant inside the window is never
removed, and the log's prefix up to the instant replays into exactly the state then.
Older instants are answered from the views' warehouse; before the log's first record,
while that is still offset 0, the cluster was empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin._config import ConfigResource

from kafkacoord.codecs import RecordType, encode_key, record_type_of
from kafkacoord.codecs.models import (
    DecisionKey,
    DecisionValue,
    PartitionKey,
    PartitionValue,
)
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.log_history import LogRead, read_log
from kafkacoord.storage.topics import HISTORY_WINDOW, InternalTopics

from .explanations import PartitionStep, explain_partition
from .instants import format_instant

__all__ = [
    "HistoryUnavailableError",
    "Window",
    "history_window",
    "metadata_as_of",
    "partition_history",
]


EARLIER_FROM_WAREHOUSE = (
    "Earlier instants need a views warehouse (kafkacoord views run): pass it as --warehouse"
)


class HistoryUnavailableError(Exception):
    """The instant is older than what the log is known to hold."""


@dataclass(frozen=True, slots=True)
class Window:
    """How far back the log answers exactly."""

    window_ms: int
    reported: bool  # False: the broker did not report the topic's setting (the default)

    def check(
        self,
        instant_ms: int,
        now_ms: int,
        read: LogRead,
        *,
        topic: str = "the metadata topic",
        earlier: str = EARLIER_FROM_WAREHOUSE,
    ) -> None:
        """Raise unless the state at ``instant_ms`` is exact: inside the window, or before
        the log's first record when that is still at offset 0 (nothing existed yet).
        ``earlier`` tells where older instants are answered."""
        if instant_ms >= now_ms - self.window_ms:
            return
        first = read.first_timestamp_ms
        if read.first_offset == 0 and first is not None and instant_ms < first:
            return
        setting = "" if self.reported else ", as configured"
        raise HistoryUnavailableError(
            f"history in the log is exact from {format_instant(now_ms - self.window_ms)} "
            f"(the last {_span(self.window_ms)}: min.compaction.lag.ms of {topic}"
            f"{setting}); {format_instant(instant_ms)} is older. {earlier}"
        )


def _span(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:g} {unit}"
    return f"{ms} ms"


def history_window(bootstrap: str, topic: str, default_ms: int, timeout_s: float = 10.0) -> Window:
    """The topic's ``min.compaction.lag.ms`` as its broker reports it, else ``default_ms``."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        admin = admin_client(bootstrap, "kafkacoord-history")  # held until the answer
        futures = admin.describe_configs([resource], request_timeout=timeout_s)
        entries = next(iter(futures.values())).result(timeout_s)
    except Exception:  # a broker that cannot describe configs: say it is the setting
        return Window(default_ms, reported=False)
    entry = entries.get(HISTORY_WINDOW)
    if entry is None or entry.value is None:
        return Window(default_ms, reported=False)
    return Window(int(entry.value), reported=True)


def metadata_as_of(
    bootstrap: str, topics: InternalTopics, instant_ms: int, now_ms: int
) -> MetadataImage:
    """The metadata image as it stood at ``instant_ms``; HistoryUnavailableError if the
    log cannot say."""
    read = read_log(bootstrap, topics.metadata, until_ms=instant_ms, client_id="kafkacoord-as-of")
    history_window(bootstrap, topics.metadata, topics.history_window_ms).check(
        instant_ms, now_ms, read
    )
    image = MetadataImage()
    for logged in read.records:
        image.replay(Record(logged.key, logged.value))
    return image


def partition_history(
    bootstrap: str, topics: InternalTopics, topic: str, partition: int, since_ms: int | None = None
) -> list[PartitionStep]:
    """The partition's records in order, explained; those before ``since_ms`` only set
    the state the first one after it changed."""
    key = PartitionKey(topic, partition)
    raw_key = encode_key(key)
    # Only this partition's records and the decisions are decoded: at a million
    # partitions nearly every record in the window is another partition's.
    read = read_log(
        bootstrap, topics.metadata, client_id="kafkacoord-explain",
        wants=lambda raw: raw == raw_key or record_type_of(raw) is RecordType.DECISION,
    )  # fmt: skip
    decisions: dict[DecisionKey, DecisionValue] = {}
    values: list[tuple[int, int, PartitionValue | None]] = []
    for logged in read.records:
        if isinstance(logged.key, DecisionKey):
            if isinstance(logged.value, DecisionValue):
                decisions[logged.key] = logged.value
        elif logged.key == key:
            value = logged.value
            values.append((logged.offset, logged.timestamp_ms,
                           value if isinstance(value, PartitionValue) else None))  # fmt: skip
    oldest = min(decisions, key=lambda d: (d.controller_epoch, d.sequence), default=None)
    steps = explain_partition(values, decisions, expired_before=oldest)
    return [s for s in steps if since_ms is None or s.time_ms >= since_ms]
