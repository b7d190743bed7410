"""Avro codecs for every kafkacoord record, request and response."""

from .errors import CodecError
from .records import (
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
