"""Who may call what on a listener that authenticates its clients (mutual TLS).

A principal is a client certificate's subject (``CN=…,O=…``, :func:`principal_of`).
Admin writes (:attr:`ApiSpec.admin`) need a principal in ``admin_principals``; node
calls (:attr:`ApiSpec.node`) need one that ``node_principals`` maps to the node id
the body names, as Kafka's CLUSTER_ACTION. Being an admin grants no node: an operator's
certificate that must also run a node is listed in both. Everything else (group
members, reads) needs only an authenticated client.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol.apis import ApiSpec
from kafkacoord.coordinator.protocol.binary import RequestBody

_KAFKA_PREFIX: Final = "User:"


@dataclass(frozen=True, slots=True)
class Refusal:
    code: ErrorCode
    message: str


def principal_name(name: str) -> str:
    """Kafka writes principals as ``User:CN=…``; the bare subject means the same here."""
    return name.removeprefix(_KAFKA_PREFIX)


class Authorizer:
    """Judges each request by its connection's principal; answers why not, or None."""

    __slots__ = ("_admins", "_nodes")

    def __init__(
        self, admins: Collection[str], nodes: Mapping[str, Collection[int]] | None = None
    ) -> None:
        self._admins = frozenset(principal_name(n) for n in admins)
        merged: dict[str, frozenset[int]] = {}
        for name, ids in (nodes or {}).items():
            key = principal_name(name)
            merged[key] = merged.get(key, frozenset()) | frozenset(ids)
        self._nodes = merged

    def refusal(self, spec: ApiSpec, body: RequestBody, principal: str | None) -> Refusal | None:
        if not spec.admin and not spec.node:
            return None
        if spec.admin and principal is not None and principal in self._admins:
            return None
        who = "an anonymous client" if principal is None else f"principal {principal!r}"
        if not spec.node:
            return Refusal(
                spec.refused_with, f"{who} may not call {spec.name}; it is not in admin_principals"
            )
        node_id = getattr(body, "node_id", None)  # every node API's body has one
        mapped = self._nodes.get(principal, frozenset()) if principal is not None else frozenset()
        if isinstance(node_id, int) and node_id in mapped:
            return None
        ids = ", ".join(map(str, sorted(mapped)))
        held = (
            f"node_principals maps it to node{'s' if len(mapped) > 1 else ''} {ids}"
            if mapped
            else "it is not in node_principals"
        )
        also = " nor in admin_principals" if spec.admin else ""
        return Refusal(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{who} may not call {spec.name} as node {node_id} (CLUSTER_ACTION): {held}{also}",
        )
