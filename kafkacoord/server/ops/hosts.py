"""Which ``Host`` headers the console answers: a page served under another name is DNS
rebinding (a site whose name resolves to this address), so it is refused."""

from __future__ import annotations

import urllib.parse
from collections.abc import Collection

from kafkacoord.server.addresses import is_loopback, is_wildcard

__all__ = ["HostCheck"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _name(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


class HostCheck:
    """The bound address, the loopback names where loopback is among the addresses bound
    (a loopback name cannot be rebound by another site), and ``allowed`` names."""

    def __init__(self, bound: str, allowed: Collection[str] = ()) -> None:
        names = {_name(n) for n in allowed}
        if not is_wildcard(bound):
            names.add(_name(bound))
        if is_wildcard(bound) or is_loopback(bound):
            names |= LOOPBACK_NAMES
        self.names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (any port) is served."""
        if not header:
            return False
        try:
            parts = urllib.parse.urlsplit(f"//{header}")
            name, _ = parts.hostname, parts.port  # a port that is no number is refused
        except ValueError:
            return False
        return name is not None and _name(name) in self.names
