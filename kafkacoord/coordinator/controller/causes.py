"""What starts each controller decision: the trigger its records carry as their cause
(docs/architecture.md#causes).

A handler's trigger comes from its request (:func:`request_trigger`); a timer's, the
controller's activation and a rebalance plan's steps set their own where they run.
"""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import DecisionKey, NodeValue, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import CONTROLLER_APIS
from kafkacoord.coordinator.runtime.shard import Request

__all__ = ["fencing_trigger", "request_trigger"]

# The APIs whose decisions have a kind of their own; every other is an admin request.
_KIND_OF_API: Final = {
    "RegisterNode": TriggerKind.NODE_REGISTERED,
    "NodeHeartbeat": TriggerKind.NODE_UNFENCED,
    "ControlledShutdown": TriggerKind.CONTROLLED_SHUTDOWN,
    "AlterPartition": TriggerKind.ISR_CHANGE,
    "ReplicaStatus": TriggerKind.ISR_CHANGE,
    "CreateTopic": TriggerKind.TOPIC_CREATED,
    "CreatePartitions": TriggerKind.PARTITIONS_CREATED,
    "DeleteTopic": TriggerKind.TOPIC_DELETED,
}


# Kinds that more than one API has: the trigger names its API.
_NAMES_ITS_API: Final = frozenset({TriggerKind.ADMIN_REQUEST, TriggerKind.ISR_CHANGE})


def request_trigger(request: Request) -> Trigger:
    """The trigger of what ``request`` decides: its kind, the node its body names, for an
    admin API the caller's principal and request id (``client id:correlation id``, which a
    retry keeps), and the API where the kind does not say it (an admin request; an ISR
    change reported by its leader or by a follower)."""
    node_id = getattr(request.body, "node_id", None)
    spec = CONTROLLER_APIS.get(request.api)
    ref = request.ref
    admin = spec is not None and spec.admin
    kind = _KIND_OF_API.get(request.api, TriggerKind.ADMIN_REQUEST)
    return Trigger(
        kind,
        node_id=node_id if isinstance(node_id, int) else -1,
        principal=ref.principal if admin else None,
        request_id=f"{ref.client_id}:{ref.correlation_id}" if admin else None,
        api=request.api if kind in _NAMES_ITS_API else None,
    )


def fencing_trigger(node_id: int, node: NodeValue | None) -> Trigger | DecisionKey:
    """The cause of a fencing's later steps (its ISR shrinks, or its end after a
    failover): the decision the node's fenced record names, or, for a record written
    before causes (or a node no longer fenced), a new decision of the bare fact."""
    if node is not None and node.fenced and node.decision is not None:
        return node.decision
    return Trigger(TriggerKind.NODE_FENCED, node_id=node_id)
