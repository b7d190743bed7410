"""Who may use this daemon's web console, from its settings.

- Bound to loopback, the console is readable without a login; bound elsewhere, every
  page needs one, and without ``console_users`` the console is not served at all.
- A write needs ``console_writes``, a logged-in user among ``console_admins``, and a
  client certificate of the console's own wherever the listener asks for one (mutual
  TLS): the daemon's certificate never writes for a person.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkacoord.console.app import ConsoleAuth
from kafkacoord.console.auth import LoginLimiter, Sessions, Users
from kafkacoord.console.cluster import Writer
from kafkacoord.wire import ClientTls

from .addresses import is_loopback
from .ops.http import HttpLimits
from .settings import Settings

__all__ = ["ConsolePolicy", "console_http_limits", "console_policy"]


@dataclass(frozen=True, slots=True)
class ConsolePolicy:
    auth: ConsoleAuth
    writer: Writer | None
    """How writes reach the daemons; None: the console is read-only."""
    read_only_reason: str
    refusal: str | None
    """Why the console is not served at all, or None."""


def console_policy(s: Settings) -> ConsolePolicy:
    loopback = is_loopback(s.metrics_host)
    auth = ConsoleAuth(
        Users(s.console_users, s.console_admins), Sessions(s.console_session_max_age_s),
        LoginLimiter(), login_to_read=not loopback,
    )  # fmt: skip
    refusal = None
    if not loopback and not s.console_users:
        refusal = (
            f"metrics_host {s.metrics_host} is not a loopback address and no console_users "
            "are set: the console would be open to the network. Set console_users (and "
            "console_admins to write), or bind metrics_host to 127.0.0.1"
        )
    writer, reason = None, ""
    if not s.console_writes:
        reason = "the console is read-only: set console_writes = true"
    elif s.tls_client_ca is not None and s.console_tls_cert is None:
        reason = (
            "console writes are off: the listeners require client certificates (mutual TLS) "
            "and the console has none of its own; set console_tls_cert and console_tls_key "
            "and add its subject to admin_principals"
        )
    else:
        tls = None
        if s.tls_ca is not None:
            tls = ClientTls(s.tls_ca, s.console_tls_cert, s.console_tls_key)
        writer = Writer(tls)
    return ConsolePolicy(auth, writer, reason, refusal)


def console_http_limits(s: Settings) -> HttpLimits:
    return HttpLimits(
        threads=s.http_threads,
        connection_limit=s.http_connection_limit,
        channel_timeout_s=s.http_channel_timeout_s,
    )
