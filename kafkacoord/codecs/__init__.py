"""Avro codecs for every kafkacoord record, request and response."""

from .errors import CodecError
from .records import (
    CONSUMER_GROUP_TYPES,
    OFFSETS_TOPIC_TYPES,
    SPECS,
    RecordType,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
    record_type_of,
)

__all__ = [
    "CONSUMER_GROUP_TYPES",
    "OFFSETS_TOPIC_TYPES",
    "SPECS",
    "CodecError",
    "RecordType",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "record_type_of",
]
