"""Node lifecycle (Kafka's ClusterControlManager and BrokerHeartbeatManager).

- ``RegisterNode``: a node id's first registration, or a new incarnation (a restarted
  process), gets a new node epoch and starts fenced, like a KRaft broker; the same
  incarnation registering again is a retry (rack, endpoints and roles may change). A new
  incarnation replaces the old one at once: what the old process held in memory is gone,
  so it loses its leaderships and ISR memberships as if fenced.
- ``NodeHeartbeat`` (with the current node epoch, else STALE_BROKER_EPOCH) renews the
  session; the first heartbeat of a fenced node unfences it, unless it is shutting down.
- A session that expires (``node_session_timeout_ms`` without a heartbeat) fences the node;
  so does the ``FenceNode`` admin request.
- ``ControlledShutdown`` marks the node shutting down (it may no longer lead or join
  ISRs), moves its leaderships away and reports what it still leads; once it leads
  nothing it is fenced at once, so it can leave (and a new incarnation register) without
  waiting for its session to expire.

Session deadlines are in memory only (timer ``("session", node_id)``), and so are the
last heartbeats an expiry's cause reports and a fencing's trigger its ISR shrinks carry.
"""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import DecisionKey, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError, TopicPartitionRef
from kafkacoord.coordinator.protocol.controller_api import (
    ControlledShutdown,
    ControlledShutdownResponse,
    FenceNode,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    RegisterNode,
    RegisterNodeResponse,
)
from kafkacoord.coordinator.runtime.timers import Timers

from .batch import Batch
from .causes import fencing_trigger
from .config import ControllerConfig
from .partitions import PartitionManager, check_node_epoch
from .records import new_node_value, node_value, reregistered_node_value

__all__ = ["ISR_SHRINK_TIMER", "SESSION_TIMER", "NodeManager", "isr_shrink_timer", "session_timer"]

SESSION_TIMER: Final = "session"
ISR_SHRINK_TIMER: Final = "isr-shrink"


def session_timer(node_id: int) -> tuple[str, int]:
    return (SESSION_TIMER, node_id)


def isr_shrink_timer(node_id: int) -> tuple[str, int]:
    return (ISR_SHRINK_TIMER, node_id)


class NodeManager:
    """Registration, heartbeats, sessions, fencing and controlled shutdown of nodes."""

    def __init__(self, config: ControllerConfig, partitions: PartitionManager, timers: Timers):
        self.config = config
        self.partitions = partitions
        self.timers = timers
        # node -> its last heartbeat, or the start of its session under this controller.
        self.heartbeats: dict[int, int] = {}
        # node -> the decision that fenced it, for the ISR shrinks that follow it.
        self.fencings: dict[int, DecisionKey] = {}

    def _renew(self, node_id: int, now_ms: int) -> None:
        self.heartbeats[node_id] = now_ms
        self.timers.schedule(session_timer(node_id), now_ms + self.config.node_session_timeout_ms)

    def expiry_trigger(self, node_id: int) -> Trigger:
        """The cause of the node's session expiring now: its last heartbeat."""
        return Trigger(TriggerKind.SESSION_EXPIRED, node_id=node_id,
                       heartbeat_ms=self.heartbeats.get(node_id, -1))  # fmt: skip

    def fencing_trigger(self, batch: Batch, node_id: int) -> Trigger | DecisionKey:
        """The decision of the node's last fencing, for its ISR shrinks."""
        decision = self.fencings.get(node_id)
        return decision if decision is not None else fencing_trigger(node_id, batch.node(node_id))

    # -- requests ---------------------------------------------------------------------------

    def register(self, batch: Batch, body: RegisterNode) -> RegisterNodeResponse:
        old = batch.node(body.node_id)
        roles = tuple(dict.fromkeys(body.roles))
        if old is not None and old.incarnation == body.incarnation:
            if (old.rack, old.endpoints, old.roles) != (body.rack, body.endpoints, roles):
                batch.put_node(
                    reregistered_node_value(
                        old, rack=body.rack, endpoints=dict(body.endpoints), roles=roles
                    )
                )
            return RegisterNodeResponse(node_epoch=old.node_epoch)
        value = new_node_value(
            body.node_id, body.incarnation, 1 if old is None else old.node_epoch + 1,
            batch.now_ms, rack=body.rack, endpoints=dict(body.endpoints), roles=roles,
        )  # fmt: skip
        batch.put_node(value)
        if old is not None:
            self.timers.cancel(session_timer(body.node_id))
            if not old.fenced:
                self.partitions.on_node_fenced(batch, body.node_id)
            if not old.shutting_down:
                # A new incarnation without a controlled shutdown first: an unclean one.
                self.partitions.on_unclean_restart(batch, body.node_id)
        return RegisterNodeResponse(node_epoch=value.node_epoch)

    def heartbeat(self, batch: Batch, body: NodeHeartbeat) -> tuple[NodeHeartbeatResponse, bool]:
        """The reply, and whether this heartbeat unfenced the node."""
        node = check_node_epoch(batch, body.node_id, body.node_epoch)
        unfenced = False
        if node.fenced and not node.shutting_down:
            node = node_value(node, fenced=False)
            batch.put_node(node)
            self.partitions.on_node_unfenced(batch, node.node_id)
            unfenced = True
        if not node.fenced:
            self._renew(node.node_id, batch.now_ms)
        reply = NodeHeartbeatResponse(
            fenced=node.fenced, shutting_down=node.shutting_down, controller_epoch=batch.epoch,
            session_timeout_ms=self.config.node_session_timeout_ms,
        )  # fmt: skip
        return reply, unfenced

    def controlled_shutdown(
        self, batch: Batch, body: ControlledShutdown
    ) -> ControlledShutdownResponse:
        node = check_node_epoch(batch, body.node_id, body.node_epoch)
        if not node.shutting_down:
            node = node_value(node, shutting_down=True)
            batch.put_node(node)
        remaining = self.partitions.controlled_shutdown(batch, node.node_id)
        if not remaining and not node.fenced:
            self.fence(batch, node.node_id)
        return ControlledShutdownResponse(
            remaining=[TopicPartitionRef(topic=t, partition=p) for t, p in remaining]
        )

    def fence_admin(self, batch: Batch, body: FenceNode) -> None:
        if batch.node(body.node_id) is None:
            raise ProtocolError(
                ErrorCode.BROKER_NOT_AVAILABLE, f"node {body.node_id} is not registered"
            )
        self.fence(batch, body.node_id)

    # -- fencing ----------------------------------------------------------------------------

    def fence(self, batch: Batch, node_id: int) -> bool:
        """Fence the node now; ``False`` if it is unknown or already fenced.

        Like KRaft's non-atomic fencing result, in two steps: the partitions it led get
        new leaders in this batch (availability first), and the ISRs it only followed in
        shrink once those are durable, in batches (:meth:`shrink_isrs`). A controller that
        fails over in between finishes the fencing on load.
        """
        node = batch.node(node_id)
        if node is None or node.fenced:
            return False
        batch.put_node(node_value(node, fenced=True))
        self.fencings[node_id] = batch.require_decision()
        self.timers.cancel(session_timer(node_id))
        self.partitions.on_node_fenced(batch, node_id, followers=False)
        self._shrink_after(batch, node_id)
        return True

    def shrink_isrs(self, batch: Batch, node_id: int) -> None:
        """The second step of a fencing: drop the node from the ISRs it follows in.

        It runs even if the node came back meanwhile: a fenced replica may have missed
        records, so it rejoins an ISR only when its leader adds it again."""
        more = self.partitions.on_node_fenced(
            batch, node_id, leaders=False, limit=self.config.fence_isr_shrink_batch
        )
        if more:
            self._shrink_after(batch, node_id)
        else:
            self.fencings.pop(node_id, None)

    def _shrink_after(self, batch: Batch, node_id: int) -> None:
        # Scheduled once this batch is durable, so the next batch never joins its append.
        # The image does not show this batch yet: a last run may find nothing left to do.
        if batch.image.in_isr_of(node_id):
            due = batch.now_ms
            batch.after_commit.append(lambda: self.timers.schedule(isr_shrink_timer(node_id), due))

    def expire(self, batch: Batch, node_id: int) -> bool:
        """The node's session timer fired."""
        return self.fence(batch, node_id)

    def start_sessions(self, batch: Batch) -> None:
        """A new controller gives every unfenced node a full session (on load)."""
        for node_id, node in sorted(batch.nodes().items()):
            if not node.fenced:
                self._renew(node_id, batch.now_ms)
