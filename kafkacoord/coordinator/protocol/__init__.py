"""The request/response protocol: Kafka's error codes and every API's bodies."""

from .apis import (
    ALL_APIS,
    APIS_BY_KEY,
    CONTROLLER_APIS,
    GROUP_APIS,
    ApiSpec,
    RequestBodyError,
    decode_request,
    encode_body,
)
from .base import Body, Empty, TopicPartitionRef
from .errors import ErrorCode, ProtocolError

__all__ = [
    "ALL_APIS",
    "APIS_BY_KEY",
    "CONTROLLER_APIS",
    "GROUP_APIS",
    "ApiSpec",
    "Body",
    "Empty",
    "ErrorCode",
    "ProtocolError",
    "RequestBodyError",
    "TopicPartitionRef",
    "decode_request",
    "encode_body",
]
