"""What kind of broker a bootstrap is, so code written for one broker's quirks runs only there.

The embedded tansu broker differs from Apache Kafka where kafkacoord reads logs
(docs/architecture.md#high-watermark): its ListOffsets(latest) undercounts multi-record
batches, and a parked fetch wakes only when its wait ends. The code around those quirks is
correct on every broker, only slower, so it is the default. A broker proves it is Apache
Kafka by advertising DescribeQuorum (API key 55) in its ApiVersions: every Kafka 4 broker
runs KRaft and serves it, tansu does not. Then the quirk paths are skipped.

The probe is one ApiVersions v0 exchange with the first bootstrap address, over TLS when
the bootstrap's client config says so (Kafka answers ApiVersions before SASL
authentication), remembered per bootstrap for the life of the process. Anything that is
not a clean answer (a broker that is down) keeps the quirk-safe default.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass
from typing import Final

from .kafka_config import client_config_of

__all__ = ["APACHE_KAFKA", "QUIRK_SAFE", "BrokerProfile", "broker_profile", "parse_api_versions"]

_API_VERSIONS: Final = 18
_DESCRIBE_QUORUM: Final = 55
_PROBE_TIMEOUT_S: Final = 2.0


@dataclass(frozen=True, slots=True)
class BrokerProfile:
    """How a broker behaves where kafkacoord reads its logs."""

    name: str
    # ListOffsets(latest) is the high watermark, whatever the batch sizes.
    exact_list_offsets: bool
    # A parked fetch returns as soon as data arrives, not when its wait ends.
    fetch_wakes_on_data: bool


APACHE_KAFKA: Final = BrokerProfile("apache-kafka", exact_list_offsets=True,
                                    fetch_wakes_on_data=True)  # fmt: skip
QUIRK_SAFE: Final = BrokerProfile("quirk-safe", exact_list_offsets=False,
                                  fetch_wakes_on_data=False)  # fmt: skip

_known: dict[str, BrokerProfile] = {}
_lock = threading.Lock()


def broker_profile(bootstrap: str) -> BrokerProfile:
    """The profile of the broker at ``bootstrap`` (probed once per process)."""
    with _lock:
        known = _known.get(bootstrap)
    if known is not None:
        return known
    profile = _probe(bootstrap)
    with _lock:
        _known[bootstrap] = profile
    return profile


def parse_api_versions(frame: bytes) -> dict[int, tuple[int, int]]:
    """API key -> (min, max) version from an ApiVersions v0 response (after its size)."""
    if len(frame) < 10:
        raise ValueError(f"ApiVersions response of {len(frame)} bytes")
    _, error, count = struct.unpack_from(">ihi", frame)
    if error != 0:
        raise ValueError(f"ApiVersions error code {error}")
    if count < 0 or len(frame) < 10 + 6 * count:
        raise ValueError(f"ApiVersions response truncated ({count} APIs, {len(frame)} bytes)")
    apis = {}
    for index in range(count):
        key, low, high = struct.unpack_from(">hhh", frame, 10 + 6 * index)
        apis[key] = (low, high)
    return apis


def profile_of(apis: dict[int, tuple[int, int]]) -> BrokerProfile:
    return APACHE_KAFKA if _DESCRIBE_QUORUM in apis else QUIRK_SAFE


def _probe(bootstrap: str) -> BrokerProfile:
    first = bootstrap.split(",", maxsplit=1)[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]") or "localhost"
    client_id = b"kafkacoord-profile"
    request = struct.pack(">hhih", _API_VERSIONS, 0, 1, len(client_id)) + client_id
    try:
        config = client_config_of(bootstrap)
        context = None if config is None else config.ssl_context()
        with socket.create_connection((host, int(port)), _PROBE_TIMEOUT_S) as raw:
            sock = raw if context is None else context.wrap_socket(raw, server_hostname=host)
            sock.settimeout(_PROBE_TIMEOUT_S)
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read(sock, 4))
            if not 10 <= size <= 1 << 20:
                raise ValueError(f"ApiVersions response size {size}")
            return profile_of(parse_api_versions(_read(sock, size)))
    except (OSError, ValueError, struct.error):
        # No log line: the CLI's --json output shares stdout with unconfigured logging.
        return QUIRK_SAFE


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ValueError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)
