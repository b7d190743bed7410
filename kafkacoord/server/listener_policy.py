"""Whether a daemon may serve node and admin calls to clients it cannot identify.

Without client authentication (mutual TLS) every client of the listener may register as
any node, fencing the real one, and make every admin write. That is safe only where no
one else reaches the listener: on loopback, or where the operator says so.
"""

from __future__ import annotations

from .addresses import is_loopback
from .settings import Settings


class ListenerSecurityError(ValueError):
    """The listener would serve node and admin calls to anyone on the network."""


def check_listener(settings: Settings) -> str | None:
    """Raise :class:`ListenerSecurityError` if the listener is off loopback without client
    authentication and ``allow_plaintext_admin`` is not set; return the warning to log
    at start when that setting lets an unauthenticated listener serve."""
    if settings.tls_client_ca is not None:
        if settings.allow_plaintext_admin:
            return "allow_plaintext_admin has no effect: the listener authenticates clients"
        return None
    if settings.allow_plaintext_admin:
        return (
            f"allow_plaintext_admin is set: the listener {settings.listen} serves node and "
            "admin calls to any client that reaches it, without authentication; use mutual "
            "TLS (tls_client_ca) with node_principals and admin_principals instead"
        )
    host = settings.listen.rpartition(":")[0]
    if is_loopback(host):
        return None
    raise ListenerSecurityError(
        f"refusing to listen on {settings.listen}: it is not a loopback address and the "
        "listener does not authenticate clients, so anyone who reaches it could register "
        "as any node (fencing the real one) and create or delete topics and groups. Turn "
        "on mutual TLS (tls_cert, tls_key and tls_client_ca, with node_principals and "
        "admin_principals), or listen on 127.0.0.1, or set allow_plaintext_admin = true "
        "(KAFKACOORD_ALLOW_PLAINTEXT_ADMIN=true) to serve them unauthenticated on a network "
        "only trusted clients reach."
    )
