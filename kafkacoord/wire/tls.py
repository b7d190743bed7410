"""TLS contexts for the listener and its clients (Kafka's ``ssl.*`` settings, in short)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """The listener's context; with ``client_ca`` every client must present a certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    # No TLS 1.3 session tickets: a client's reader then only ever waits for replies.
    context.num_tickets = 0
    if client_ca is not None:
        context.load_verify_locations(str(client_ca))
        context.verify_mode = ssl.CERT_REQUIRED  # ssl.client.auth=required
    return context


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a client reaches a TLS listener: the CA it trusts, and its own certificate."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=None if self.ca is None else str(self.ca))
        context.check_hostname = self.check_hostname
        if self.cert is not None:
            context.load_cert_chain(str(self.cert), None if self.key is None else str(self.key))
        return context
