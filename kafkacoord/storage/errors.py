"""Storage errors, each naming what is wrong and how to fix it."""

from __future__ import annotations


class StorageError(RuntimeError):
    """Base class of storage failures."""


class BrokerUnavailableError(StorageError):
    """The Kafka cluster could not be reached."""


class EmbeddedBrokerError(StorageError):
    """The embedded broker could not be found or started."""


class TopicConfigError(StorageError):
    """An internal topic exists with a configuration kafkacoord cannot run on."""


class PoisonRecordError(StorageError):
    """An undecodable record in an internal topic, raised only in strict mode."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"poison record at {topic}-{partition}@{offset}: {reason}. "
            "Strict mode stops here; unset strict mode to count, log and skip such records."
        )
        self.topic, self.partition, self.offset = topic, partition, offset


class AppendError(StorageError):
    """An append was not durably acknowledged."""

    def __init__(self, message: str, *, retriable: bool, fatal: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.fatal = fatal


class TopicIdentityChangedError(StorageError):
    """The topic being read is not the one the cache was loaded from (broker lost, or recreated)."""

    def __init__(self, topic: str, loaded: str, current: str | None) -> None:
        now = "it is gone" if current is None else f"it is now {current}"
        super().__init__(f"topic {topic} changed identity: loaded {loaded}, {now}")
        self.topic, self.loaded, self.current = topic, loaded, current


class LoadCancelledError(StorageError):
    """A load stopped between chunks because its owner is closing."""
