"""The source's options, parsed once and checked with clear errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from kafkacoord.codecs import OFFSETS_TOPIC_TYPES, RecordType


class Role(str, Enum):
    """What a topic holds, which decides the record types allowed in it."""

    METADATA = "metadata"
    OFFSETS = "offsets"
    ANY = "any"

    @property
    def allowed(self) -> frozenset[RecordType]:
        if self is Role.METADATA:
            return frozenset(
                {
                    RecordType.CONTROLLER,
                    RecordType.NODE,
                    RecordType.TOPIC,
                    RecordType.PARTITION,
                    RecordType.REBALANCE,
                    RecordType.DECISION,
                }
            )
        if self is Role.OFFSETS:
            # As the loader's offsets policy: ShardLeader markers fence deposed shard leaders.
            return OFFSETS_TOPIC_TYPES
        return frozenset(RecordType)

    @classmethod
    def of(cls, topic: str) -> Role:
        # Internal topics are named <prefix>metadata and <prefix>offsets
        # (docs/architecture.md#topics-and-records).
        if topic.endswith("metadata"):
            return cls.METADATA
        if topic.endswith("offsets"):
            return cls.OFFSETS
        return cls.ANY


class OptionError(ValueError):
    """An option the source cannot work with; the message names it and the fix."""


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap: str
    topics: tuple[str, ...]
    decode: bool = True
    starting_offsets: str = "earliest"
    max_records_per_batch: int | None = None
    # Kafka partitions with fewer new records than this share a Spark task (0: never).
    min_records_per_task: int = 0
    fence: bool = True
    read_timeout_s: float = 60.0
    # Passed to librdkafka as is (options named ``kafka.<setting>``).
    kafka: Mapping[str, str] = field(default_factory=dict)

    def role(self, topic: str) -> Role:
        return Role.of(topic) if self.decode else Role.ANY

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {k.lower(): v for k, v in options.items()}
        bootstrap = opts.get("bootstrap") or opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise OptionError("option 'bootstrap' (Kafka bootstrap servers) is required")
        if "topics" in opts:
            topics = tuple(t.strip() for t in opts["topics"].split(",") if t.strip())
        else:
            prefix = opts.get("prefix", "__kc_")
            topics = (f"{prefix}metadata", f"{prefix}offsets")
        if not topics:
            raise OptionError("option 'topics' names no topic")
        decode = opts.get("decode", "avro").lower()
        if decode not in ("avro", "none"):
            raise OptionError(f"option 'decode' must be 'avro' or 'none', not {decode!r}")
        limit = opts.get("maxrecordsperbatch")
        max_records = _positive_int("maxRecordsPerBatch", limit) if limit else None
        packing = opts.get("minrecordspertask")
        min_records = _positive_int("minRecordsPerTask", packing) if packing else 0
        kafka = {
            k.removeprefix("kafka."): v
            for k, v in opts.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            decode=decode == "avro",
            starting_offsets=opts.get("startingoffsets", "earliest").strip(),
            max_records_per_batch=max_records,
            min_records_per_task=min_records,
            fence=_bool("fence", opts.get("fence", "true")),
            read_timeout_s=float(opts.get("readtimeoutseconds", "60")),
            kafka=kafka,
        )


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name!r} must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise OptionError(f"option {name!r} must be a positive integer, not {value}")
    return value


def _bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, not {text!r}")
