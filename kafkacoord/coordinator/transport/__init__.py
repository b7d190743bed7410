"""Requests and replies over Kafka topics (DESIGN §2): no extra ports, no discovery.

A request goes to the partition whose owner must answer it; the reply goes to the
caller's partition of the responses topic, matched by client id and correlation id.
"""

from .client import RequestClient, RequestError, RequestTimeoutError
from .receiver import RequestReceiver
from .replies import ReplySender

__all__ = ["ReplySender", "RequestClient", "RequestError", "RequestReceiver", "RequestTimeoutError"]
