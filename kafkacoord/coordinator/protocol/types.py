"""The bound of every request field, declared once.

Each alias is Kafka's wire type of the field or, where kafkacoord writes the value into
a record, the Avro type it becomes (an Avro ``int`` is Kafka's int32, a ``long`` its
int64). pydantic-core checks them in Rust while it parses a body, so a value out of
its bound is refused before any handler sees it, as Kafka refuses what its schema
types cannot hold. ``tests/unit/protocol/test_bounds.py`` fails on a request field
of an unbounded type.

A bound whose violation Kafka answers with a code of its own carries it as
:class:`RefusedWith`; every other one is INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, TypeVar

from pydantic import Field

from .errors import ErrorCode

INT16_MIN: Final = -(2**15)
INT16_MAX: Final = 2**15 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

STRING_MAX: Final = 32_767
"""Kafka's STRING and COMPACT_STRING: at most 0x7fff (its readers refuse longer). Counted
here in characters, not UTF-8 bytes (a check pydantic-core makes in Rust): a bound, not
Kafka's byte-exact limit."""
BYTES_MAX: Final = INT32_MAX
"""Kafka's BYTES: an int32 length. The frame limit (``max_frame_bytes``) binds first."""
TOPIC_NAME_MAX: Final = 249
TOPIC_NAME_PATTERN: Final = r"^[a-zA-Z0-9._-]+$"
"""Kafka's legal topic names (``org.apache.kafka.common.internals.Topic``); the pattern
also refuses the empty name."""

MAX_PARTITIONS_PER_BATCH: Final = 10_000
"""Kafka's ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``: partitions one
CreateTopics may create (more is POLICY_VIOLATION)."""
REPLICAS_MAX: Final = INT16_MAX
"""Replicas of one partition: Kafka's replication factor is an int16."""
LIST_MAX: Final = 1_000_000
"""Items of any other list of a request (topics, partitions, groups, members, moves):
more than a frame of the default 1 MiB can hold; a bound still if it is raised."""
FEW_MAX: Final = 1_000
"""Lists and maps that name a handful of things (protocols, roles, configs, goals)."""

TIMESTAMP_MS_MAX: Final = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: no clock a commit is stamped with reads later."""
RETENTION_MS_MAX: Final = INT64_MAX - TIMESTAMP_MS_MAX
"""Kafka writes expireTimestamp = commit time + retentionTimeMs into an int64 (an Avro
long here): a retention past this could overflow it."""


@dataclass(frozen=True, slots=True)
class RefusedWith:
    """The Kafka error a value out of this bound is answered with (not INVALID_REQUEST)."""

    code: ErrorCode


# -- integers ------------------------------------------------------------------------------

Int16 = Annotated[int, Field(ge=INT16_MIN, le=INT16_MAX)]
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
PartitionId = Annotated[int, Field(ge=0, le=INT32_MAX)]
NodeId = Annotated[int, Field(ge=0, le=INT32_MAX)]
Count32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
"""A positive int32: a partition count, a concurrency limit."""
RetentionMs = Annotated[int, Field(ge=INT64_MIN, le=RETENTION_MS_MAX)]
NewPartitions = Annotated[
    int,
    Field(ge=INT32_MIN, le=MAX_PARTITIONS_PER_BATCH),
    RefusedWith(ErrorCode.POLICY_VIOLATION),
]
"""CreateTopics' num_partitions (-1: the default)."""

# -- strings and bytes -----------------------------------------------------------------------

String = Annotated[str, Field(max_length=STRING_MAX)]
GroupId = String
MemberId = String
InstanceId = String
"""group.instance.id: Kafka's clients check it like a topic name; its broker does not."""
ClientText = String
"""Client id and host, reasons, racks, protocol names and types, config names."""
CommitMetadata = String
"""Commit metadata; ``offset.metadata.max.bytes`` is the shard's finer check
(OFFSET_METADATA_TOO_LARGE, per partition, as in Kafka)."""
# Topics the controller owns: Kafka's rule, with Kafka's answer to an illegal name.
TopicName = Annotated[
    str,
    Field(max_length=TOPIC_NAME_MAX, pattern=TOPIC_NAME_PATTERN),
    RefusedWith(ErrorCode.INVALID_TOPIC_EXCEPTION),
]
TopicText = String
"""A topic on the broker, which kafkacoord does not own (the group APIs' topics): only
Kafka's STRING bound applies. A Kafka-compatible broker may hold names Kafka refuses
(tansu creates "a b"), and the groups it coordinates must commit what they are assigned.
Kafka itself answers a commit for a topic that cannot exist UNKNOWN_TOPIC_OR_PARTITION,
per partition, from its metadata; kafkacoord has none to check against."""
Bytes = Annotated[bytes, Field(max_length=BYTES_MAX)]

# -- lists -------------------------------------------------------------------------------------

T = TypeVar("T")
ListOf = Annotated[list[T], Field(max_length=LIST_MAX)]
FewOf = Annotated[list[T], Field(max_length=FEW_MAX)]
Replicas = Annotated[list[Int32], Field(max_length=REPLICAS_MAX)]
NewPartitionList = Annotated[
    list[T], Field(max_length=MAX_PARTITIONS_PER_BATCH), RefusedWith(ErrorCode.POLICY_VIOLATION)
]
"""The replicas of each new partition, in order: at most a CreateTopics' worth."""
NewAssignment = Annotated[
    dict[Int32, Replicas],
    Field(max_length=MAX_PARTITIONS_PER_BATCH),
    RefusedWith(ErrorCode.POLICY_VIOLATION),
]
"""Partition -> replicas of a new topic."""
TextMap = Annotated[dict[ClientText, String], Field(max_length=FEW_MAX)]
"""Configs, endpoints: a handful of named strings."""

__all__ = [
    "BYTES_MAX",
    "FEW_MAX",
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "LIST_MAX",
    "MAX_PARTITIONS_PER_BATCH",
    "REPLICAS_MAX",
    "RETENTION_MS_MAX",
    "STRING_MAX",
    "TIMESTAMP_MS_MAX",
    "TOPIC_NAME_MAX",
    "TOPIC_NAME_PATTERN",
    "Bytes",
    "ClientText",
    "CommitMetadata",
    "Count32",
    "FewOf",
    "GroupId",
    "InstanceId",
    "Int16",
    "Int32",
    "Int64",
    "ListOf",
    "MemberId",
    "NewAssignment",
    "NewPartitionList",
    "NewPartitions",
    "NodeId",
    "PartitionId",
    "RefusedWith",
    "Replicas",
    "RetentionMs",
    "String",
    "TextMap",
    "TopicName",
    "TopicText",
]
