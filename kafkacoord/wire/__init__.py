"""The wire between clients and daemons: frames, the listener, client connections, TLS.

A bottom layer: it moves headers and bytes, and knows nothing of shards or APIs.
"""

from .connection import Connection, ConnectionLostError, split_endpoint
from .frames import NO_SHARD, FrameError, RequestHeader, ResponseFrame
from .server import Listener, ListenerLimits, ListenerStats, ServedConnection, ServerConnection
from .tls import ClientTls, server_context

__all__ = [
    "NO_SHARD",
    "ClientTls",
    "Connection",
    "ConnectionLostError",
    "FrameError",
    "Listener",
    "ListenerLimits",
    "ListenerStats",
    "RequestHeader",
    "ResponseFrame",
    "ServedConnection",
    "ServerConnection",
    "server_context",
    "split_endpoint",
]
