"""Record framing: every key and value on an internal topic.

Key bytes:   ``[record type: u8][key version: u8][Avro body]``
Value bytes: ``[value version: u16 big-endian][Avro body]``

Keys are canonical (same logical key, same bytes), which compaction relies on.
Values are written with the newest schema and read with it too; an older
writer version is resolved by Avro schema resolution.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import IntEnum
from io import BytesIO
from typing import Any, Final, TypeVar, cast

import fastavro
import fastavro.validation

from . import offset_commit_codec, partition_codec, schemas
from .avro_binary import write_string
from .errors import CodecError
from .models import (
    AvroModel,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ControllerKey,
    ControllerValue,
    DecisionKey,
    DecisionValue,
    GroupAdminKey,
    GroupAdminValue,
    GroupMetadataKey,
    GroupMetadataValue,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionValue,
    RebalanceKey,
    RebalanceValue,
    ShardLeaderKey,
    ShardLeaderValue,
    TopicKey,
    TopicValue,
)


class RecordType(IntEnum):
    """The tag in the first byte of every key: which record a key and its value are."""

    CONTROLLER = 1
    NODE = 2
    TOPIC = 3
    PARTITION = 4
    REBALANCE = 5
    DECISION = 6
    GROUP_METADATA = 10
    OFFSET_COMMIT = 11
    SHARD_LEADER = 12
    # KIP-848 consumer groups (Kafka's ConsumerGroup* records).
    CONSUMER_GROUP_METADATA = 13
    CONSUMER_GROUP_PARTITION_METADATA = 14
    CONSUMER_GROUP_MEMBER_METADATA = 15
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 16
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 17
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 18
    # An admin action's audit record: history only, tombstoned in its own batch.
    GROUP_ADMIN = 19
    # 20 and 21 were the request and response envelopes of the retired request topics.


@dataclass(frozen=True, slots=True)
class _Version:
    number: int
    schema: Any


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """How one record type is framed: its key and value classes and schema versions."""

    record_type: RecordType
    schema_name: str
    key_cls: type[AvroModel]
    value_cls: type[AvroModel]

    @property
    def key_versions(self) -> dict[int, Any]:
        name = f"{self.schema_name}_key"
        return {v: schemas.parsed(name, v) for v in schemas.versions(name)}

    @property
    def value_versions(self) -> dict[int, Any]:
        name = f"{self.schema_name}_value"
        return {v: schemas.parsed(name, v) for v in schemas.versions(name)}


SPECS: Final[dict[RecordType, RecordSpec]] = {
    spec.record_type: spec
    for spec in (
        RecordSpec(RecordType.CONTROLLER, "controller", ControllerKey, ControllerValue),
        RecordSpec(RecordType.NODE, "node", NodeKey, NodeValue),
        RecordSpec(RecordType.TOPIC, "topic", TopicKey, TopicValue),
        RecordSpec(RecordType.PARTITION, "partition", PartitionKey, PartitionValue),
        RecordSpec(RecordType.REBALANCE, "rebalance", RebalanceKey, RebalanceValue),
        RecordSpec(RecordType.DECISION, "decision", DecisionKey, DecisionValue),
        RecordSpec(
            RecordType.GROUP_METADATA, "group_metadata", GroupMetadataKey, GroupMetadataValue
        ),
        RecordSpec(RecordType.OFFSET_COMMIT, "offset_commit", OffsetCommitKey, OffsetCommitValue),
        RecordSpec(RecordType.SHARD_LEADER, "shard_leader", ShardLeaderKey, ShardLeaderValue),
        RecordSpec(RecordType.GROUP_ADMIN, "group_admin", GroupAdminKey, GroupAdminValue),
        *(
            RecordSpec(RecordType[name.upper()], name, key_cls, value_cls)
            for name, key_cls, value_cls in (
                ("consumer_group_metadata", ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
                (
                    "consumer_group_partition_metadata",
                    ConsumerGroupPartitionMetadataKey,
                    ConsumerGroupPartitionMetadataValue,
                ),
                (
                    "consumer_group_member_metadata",
                    ConsumerGroupMemberMetadataKey,
                    ConsumerGroupMemberMetadataValue,
                ),
                (
                    "consumer_group_target_assignment_metadata",
                    ConsumerGroupTargetAssignmentMetadataKey,
                    ConsumerGroupTargetAssignmentMetadataValue,
                ),
                (
                    "consumer_group_target_assignment_member",
                    ConsumerGroupTargetAssignmentMemberKey,
                    ConsumerGroupTargetAssignmentMemberValue,
                ),
                (
                    "consumer_group_current_member_assignment",
                    ConsumerGroupCurrentMemberAssignmentKey,
                    ConsumerGroupCurrentMemberAssignmentValue,
                ),
            )
        ),
    )
}

CONSUMER_GROUP_TYPES: Final = frozenset(
    {
        RecordType.CONSUMER_GROUP_METADATA,
        RecordType.CONSUMER_GROUP_PARTITION_METADATA,
        RecordType.CONSUMER_GROUP_MEMBER_METADATA,
        RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    }
)
OFFSETS_TOPIC_TYPES: Final = frozenset(
    {
        RecordType.GROUP_METADATA,
        RecordType.OFFSET_COMMIT,
        RecordType.SHARD_LEADER,
        RecordType.GROUP_ADMIN,
    }
    | CONSUMER_GROUP_TYPES
)
"""Every record type that belongs on ``<prefix>offsets``."""

_RECORD_TYPES: Final[dict[int, RecordType]] = {int(t): t for t in RecordType}
_BY_KEY_CLS: Final[dict[type[AvroModel], RecordSpec]] = {s.key_cls: s for s in SPECS.values()}
_BY_VALUE_CLS: Final[dict[type[AvroModel], RecordSpec]] = {s.value_cls: s for s in SPECS.values()}
_VALUE_HEADER = struct.Struct(">H")


class _Codec:
    """Per record type: parsed schemas and the current versions, resolved once."""

    __slots__ = ("key_current", "key_schemas", "spec", "value_current", "value_schemas")

    def __init__(self, spec: RecordSpec) -> None:
        self.spec = spec
        self.key_schemas = spec.key_versions
        self.value_schemas = spec.value_versions
        self.key_current = _Version(max(self.key_schemas), self.key_schemas[max(self.key_schemas)])
        self.value_current = _Version(
            max(self.value_schemas), self.value_schemas[max(self.value_schemas)]
        )


_CODECS: Final[dict[int, _Codec]] = {int(t): _Codec(s) for t, s in SPECS.items()}

# Hand-written codecs of hot records, used only for the schema version they were written
# for: a newer version falls back to fastavro until its hand-written codec catches up.
_FAST_PARTITION_KEY: Final = (
    _CODECS[RecordType.PARTITION].key_current.number == partition_codec.KEY_VERSION
)
_FAST_PARTITION_VALUE: Final = (
    _CODECS[RecordType.PARTITION].value_current.number == partition_codec.VALUE_VERSION
)
# A key's header: its record type and key version.
_KEY_HEADER_LEN: Final = 2
_PARTITION_KEY_HEADER: Final = bytes((RecordType.PARTITION, partition_codec.KEY_VERSION))
_PARTITION_VALUE_HEADER: Final = _VALUE_HEADER.pack(partition_codec.VALUE_VERSION)
_PARTITION_PREVIOUS_HEADER: Final = _VALUE_HEADER.pack(partition_codec.PREVIOUS_VALUE_VERSION)
_FAST_COMMIT_VALUE: Final = (
    _CODECS[RecordType.OFFSET_COMMIT].value_current.number == offset_commit_codec.VALUE_VERSION
)
_COMMIT_VALUE_HEADER: Final = _VALUE_HEADER.pack(offset_commit_codec.VALUE_VERSION)


def _write(schema: Any, datum: dict[str, Any], header: bytes) -> bytes:
    # fastavro writes an int that does not fit Avro's 32 bits without a word, and a
    # reader would then fail on it: validate first (the hot records have codecs of their
    # own, which check their ranges).
    try:
        fastavro.validation.validate(datum, schema, raise_errors=True)
        out = BytesIO()
        out.write(header)
        fastavro.schemaless_writer(out, schema, datum)
    except Exception as exc:  # ValidationError, and fastavro's TypeErrors on odd types
        raise CodecError("record does not fit its schema", part="record", cause=exc) from exc
    return out.getvalue()


def _read(data: bytes, start: int, writer: Any, reader: Any, part: str) -> dict[str, Any]:
    buf = BytesIO(data)
    buf.seek(start)
    try:
        datum = cast("dict[str, Any]", fastavro.schemaless_reader(buf, writer, reader))
    except Exception as exc:  # fastavro raises many types on garbage
        raise CodecError("Avro body does not match its schema", part=part, cause=exc) from exc
    if buf.tell() != len(data):
        raise CodecError(f"{len(data) - buf.tell()} trailing bytes after the Avro body", part=part)
    return datum


def encode_key(key: AvroModel) -> bytes:
    if _FAST_PARTITION_KEY and type(key) is PartitionKey:
        # Not cached: a failover writes more distinct partition keys than any cache holds,
        # and the hand-written encoder costs less than a miss.
        return _PARTITION_KEY_HEADER + _fast_encode(partition_codec.encode_key_body, key, "key")
    if type(key) is OffsetCommitKey:
        # Cached by its fields: a dataclass's hash and equality run in Python, and every
        # commit looks its key up.
        return _encode_commit_key(key.group, key.topic, key.partition)
    return _encode_cached_key(key)


@functools.lru_cache(maxsize=65_536)
def _encode_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _encode_key(OffsetCommitKey(group, topic, partition))


@functools.lru_cache(maxsize=65_536)
def _encode_cached_key(key: AvroModel) -> bytes:
    """Keys repeat (a consumer commits the same partitions again and again): cached."""
    return _encode_key(key)


def _encode_key(key: AvroModel) -> bytes:
    spec = _BY_KEY_CLS.get(type(key))
    if spec is None:
        raise CodecError(f"{type(key).__name__} is not a record key", part="key")
    codec = _CODECS[spec.record_type]
    header = bytes((spec.record_type, codec.key_current.number))
    return _write(codec.key_current.schema, key.to_avro(), header)


def encode_value(value: AvroModel) -> bytes:
    if _FAST_COMMIT_VALUE and type(value) is OffsetCommitValue:
        body = _fast_encode(offset_commit_codec.encode_value_body, value, "value")
        return _COMMIT_VALUE_HEADER + body
    if _FAST_PARTITION_VALUE and type(value) is PartitionValue:
        body = _fast_encode(partition_codec.encode_value_body, value, "value")
        return _PARTITION_VALUE_HEADER + body
    spec = _BY_VALUE_CLS.get(type(value))
    if spec is None:
        raise CodecError(f"{type(value).__name__} is not a record value", part="value")
    current = _CODECS[spec.record_type].value_current
    return _write(current.schema, value.to_avro(), _VALUE_HEADER.pack(current.number))


def partition_key_prefix(topic: str) -> bytes:
    """The bytes every partition key of ``topic`` starts with (the type tag, the key
    version, then Avro's topic string: its length first, so no other topic shares them).
    Readers that want one topic's partitions filter raw keys on it without decoding."""
    return _PARTITION_KEY_HEADER + write_string(topic)


def group_key_filter(
    group: str, types: Collection[RecordType] | None = None
) -> Callable[[bytes], bool]:
    """Whether a raw key may be one of ``group``'s records (of ``types``, or of any type
    whose key starts with the group), in any key version: after the header (type, key
    version) comes Avro's group string, its length first. Readers of one group's records
    filter raw keys on it, then decode only those; a key that merely shares the prefix
    (another type's) is left to the decoded check."""
    body = write_string(group)
    wanted = None if types is None else frozenset(int(t) for t in types)
    # The prefix first: a key long enough for it has a type byte to check.
    return lambda raw: (
        raw.startswith(body, _KEY_HEADER_LEN) and (wanted is None or raw[0] in wanted)
    )


_T = TypeVar("_T")


def _fast_encode(encode: Any, model: AvroModel, part: str) -> bytes:
    try:
        return cast(bytes, encode(model))
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise CodecError(f"{type(model).__name__} does not fit its schema", part=part,
                         cause=exc) from exc  # fmt: skip


def _fast_decode(
    decode: Callable[[bytes, int], tuple[_T, int]], data: bytes, start: int, part: str
) -> _T:
    """A hand-written decoder's result, held to the same rules as :func:`_read`."""
    try:
        model, end = decode(data, start)
    except (ValueError, IndexError) as exc:  # UnicodeDecodeError is a ValueError
        raise CodecError("Avro body does not match its schema", part=part, cause=exc) from exc
    if end != len(data):
        raise CodecError(f"{len(data) - end} trailing bytes after the Avro body", part=part)
    return model


def record_type_of(key: bytes | None) -> RecordType:
    """The record type of raw key bytes, without decoding the body."""
    if not key:
        raise CodecError("empty key", part="key")
    rtype = _RECORD_TYPES.get(key[0])  # not RecordType(tag): an enum call costs 10x more
    if rtype is None:
        raise CodecError(f"unknown record type tag {key[0]}", part="key")
    return rtype


def decode_key(data: bytes | None) -> AvroModel:
    rtype = record_type_of(data)
    assert data is not None
    if len(data) < 2:
        raise CodecError("key shorter than its 2-byte header", part="key")
    if rtype is RecordType.PARTITION and data[1] == partition_codec.KEY_VERSION:
        return _fast_decode(partition_codec.decode_key_body, data, 2, "key")
    codec = _CODECS[rtype]
    writer = codec.key_schemas.get(data[1])
    if writer is None:
        raise CodecError(f"unsupported key version {data[1]} for {rtype.name}", part="key")
    reader = None if data[1] == codec.key_current.number else codec.key_current.schema
    return codec.spec.key_cls.from_avro(_read(data, 2, writer, reader, "key"))


def decode_value(rtype: RecordType, data: bytes) -> AvroModel:
    if len(data) < _VALUE_HEADER.size:
        raise CodecError("value shorter than its 2-byte header", part="value")
    if rtype is RecordType.PARTITION and data[:2] == _PARTITION_VALUE_HEADER:
        return _fast_decode(partition_codec.decode_value_body, data, 2, "value")
    if rtype is RecordType.PARTITION and data[:2] == _PARTITION_PREVIOUS_HEADER:
        return _fast_decode(partition_codec.decode_previous_value_body, data, 2, "value")
    if rtype is RecordType.OFFSET_COMMIT and data[:2] == _COMMIT_VALUE_HEADER:
        return _fast_decode(offset_commit_codec.decode_value_body, data, 2, "value")
    (version,) = _VALUE_HEADER.unpack_from(data)
    codec = _CODECS[rtype]
    writer = codec.value_schemas.get(version)
    if writer is None:
        raise CodecError(f"unsupported value version {version} for {rtype.name}", part="value")
    reader = None if version == codec.value_current.number else codec.value_current.schema
    datum = _read(data, _VALUE_HEADER.size, writer, reader, "value")
    try:
        return codec.spec.value_cls.from_avro(datum)
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"value does not fit {rtype.name}", part="value", cause=exc) from exc


def decode_record(key: bytes | None, value: bytes | None) -> tuple[AvroModel, AvroModel | None]:
    """Decode a whole record; a ``None`` value is a tombstone."""
    if (
        key is not None and value is not None and key[:2] == _PARTITION_KEY_HEADER
        and value[:2] in (_PARTITION_VALUE_HEADER, _PARTITION_PREVIOUS_HEADER)
    ):  # fmt: skip
        # The million-partition case: the value holds the key's fields, decoded once.
        decode = partition_codec.decode_pair(key, with_cause=value[:2] == _PARTITION_VALUE_HEADER)
        pair = _fast_decode(decode, value, 2, "value")
        if pair is not None:
            return pair
    decoded_key = decode_key(key)
    if value is None:
        return decoded_key, None
    return decoded_key, decode_value(record_type_of(key), value)


def encode_record(key: AvroModel, value: AvroModel | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), None if value is None else encode_value(value)


def encode_value_as(value: AvroModel, version: int) -> bytes:
    """Encode with an older schema version (tests and migration tooling)."""
    spec = _BY_VALUE_CLS[type(value)]
    schema = _CODECS[spec.record_type].value_schemas[version]
    datum = {k: v for k, v in value.to_avro().items() if _has_field(schema, k)}
    return _write(schema, datum, _VALUE_HEADER.pack(version))


def _has_field(schema: Any, name: str) -> bool:
    return any(f["name"] == name for f in schema["fields"])
