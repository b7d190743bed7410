"""What a bind address reaches: only this machine (loopback), or every interface."""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["is_loopback", "is_wildcard"]


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` binds to is a loopback address."""
    host = host.strip("[]")
    if not host:
        return False  # every interface
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        # The listener binds every address the name resolves to.
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
