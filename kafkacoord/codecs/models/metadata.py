"""Records of the controller's decision log (``__kc_metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Self

from .base import AvroModel


@dataclass(frozen=True, slots=True)
class ControllerKey(AvroModel):
    """The one controller record's key (type tag 1, no fields)."""


@dataclass(frozen=True, slots=True)
class ControllerValue(AvroModel):
    """The active controller: its epoch, node, incarnation and listener endpoint."""

    epoch: int
    node_id: int
    incarnation: str
    activated_ms: int
    endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Trigger(AvroModel):
    """What started a controller decision (docs/architecture.md#causes): shared by every
    record the decision wrote. ``kind`` is one of :class:`TriggerKind`'s values; the other
    fields are set where the kind has them."""

    kind: str
    node_id: int = -1
    heartbeat_ms: int = -1
    principal: str | None = None
    request_id: str | None = None
    api: str | None = None
    plan_id: str | None = None
    plan_step: int = -1
    imbalance: float | None = None


class TriggerKind:
    """Values of :attr:`Trigger.kind`: a string in the record, so a new kind needs no
    new schema version."""

    SESSION_EXPIRED: Final = "session_expired"
    CONTROLLED_SHUTDOWN: Final = "controlled_shutdown"
    ISR_CHANGE: Final = "isr_change"
    ADMIN_REQUEST: Final = "admin_request"
    REBALANCE_PLAN: Final = "rebalance_plan"
    LEADER_REBALANCE: Final = "leader_rebalance"
    TOPIC_CREATED: Final = "topic_created"
    PARTITIONS_CREATED: Final = "partitions_created"
    TOPIC_DELETED: Final = "topic_deleted"
    NODE_REGISTERED: Final = "node_registered"
    NODE_UNFENCED: Final = "node_unfenced"
    NODE_FENCED: Final = "node_fenced"  # a fencing whose own trigger was not recorded
    CONTROLLER_ACTIVATED: Final = "controller_activated"
    INTERNAL_TOPICS: Final = "internal_topics"


@dataclass(frozen=True, slots=True)
class DecisionKey(AvroModel):
    """A controller decision's key (type tag 6): the controller epoch that decided and
    that controller's count of its decisions, so ids are unique and ordered, and a
    replay reproduces them."""

    controller_epoch: int
    sequence: int


@dataclass(frozen=True, slots=True)
class DecisionValue(AvroModel):
    """A controller decision, written once in the batch of the records it explains
    (docs/architecture.md#causes): its :class:`Trigger` and when it was decided."""

    trigger: Trigger
    decided_ms: int
    controller_epoch: int  # as the key's: every metadata value carries its epoch (fencing)

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(Trigger.from_avro(data["trigger"]), data["decided_ms"],
                   data["controller_epoch"])  # fmt: skip


@dataclass(frozen=True, slots=True)
class Cause(AvroModel):
    """Why a partition changed: the decision (its :class:`DecisionKey`, whose record holds
    the trigger) and the election rule that chose the leader (empty when none was
    elected). What the partition was before is the record before it (or the views'
    history once compacted), so it is not repeated here."""

    decision: DecisionKey
    rule: str = ""

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(DecisionKey(**data["decision"]), data["rule"])


@dataclass(frozen=True, slots=True)
class NodeKey(AvroModel):
    """A node's key (type tag 2)."""

    node_id: int


@dataclass(frozen=True, slots=True)
class NodeValue(AvroModel):
    """A registered node: its epoch, fencing and shutdown state, rack, endpoints, roles."""

    node_id: int
    incarnation: str
    node_epoch: int
    fenced: bool
    registered_ms: int
    controller_epoch: int
    rack: str | None = None
    endpoints: dict[str, str] = field(default_factory=dict)
    shutting_down: bool = False
    roles: tuple[str, ...] = ()
    # The decision that last fenced, unfenced or shut it down (NodeValue v3); None before.
    decision: DecisionKey | None = None

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        decision = data.get("decision")
        if decision is not None:
            decision = DecisionKey(**decision)
        return cls(**{**data, "roles": tuple(data["roles"]), "decision": decision})


@dataclass(frozen=True, slots=True)
class TopicKey(AvroModel):
    """A logical topic's key (type tag 3)."""

    name: str


@dataclass(frozen=True, slots=True)
class TopicValue(AvroModel):
    """A logical topic: id, partition count, replication factor, configs, deletion flag."""

    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    created_ms: int
    controller_epoch: int
    configs: dict[str, str] = field(default_factory=dict)
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class PartitionKey(AvroModel):
    """A logical partition's key (type tag 4)."""

    topic: str
    partition: int


class PartitionState(str, Enum):
    """A partition's persisted state (Kafka's New, Online and Offline)."""

    NEW = "NEW"
    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"


@dataclass(frozen=True, slots=True)
class Reassignment(AvroModel):
    """A reassignment's ORS/TRS/AR/RR, persisted so a new controller resumes mid-flight
    (docs/architecture.md#reassignment)."""

    original_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    step: str
    started_ms: int

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(
            original_replicas=tuple(data["original_replicas"]),
            target_replicas=tuple(data["target_replicas"]),
            adding_replicas=tuple(data["adding_replicas"]),
            removing_replicas=tuple(data["removing_replicas"]),
            step=data["step"],
            started_ms=data["started_ms"],
        )


@dataclass(frozen=True, slots=True)
class PartitionValue(AvroModel):
    """A partition: replicas, ISR, leader, leader and partition epochs, reassignment."""

    topic: str
    partition: int
    state: PartitionState
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    updated_ms: int
    controller_epoch: int
    reassignment: Reassignment | None = None
    election: str = ""
    # KIP-966: replicas that left the ISR below min.insync.replicas (they hold every
    # committed record), and the last leader once ISR and ELR are both empty.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # Why this value was written (PartitionValue v3); None in older records.
    cause: Cause | None = None

    def to_avro(self) -> dict[str, Any]:
        data = super(PartitionValue, self).to_avro()
        data["state"] = self.state.value
        return data

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        reassignment = data["reassignment"]
        return cls(
            topic=data["topic"],
            partition=data["partition"],
            state=PartitionState(data["state"]),
            replicas=tuple(data["replicas"]),
            isr=tuple(data["isr"]),
            leader=data["leader"],
            leader_epoch=data["leader_epoch"],
            partition_epoch=data["partition_epoch"],
            updated_ms=data["updated_ms"],
            controller_epoch=data["controller_epoch"],
            reassignment=None if reassignment is None else Reassignment.from_avro(reassignment),
            election=data["election"],
            elr=tuple(data.get("elr", ())),
            last_known_elr=tuple(data.get("last_known_elr", ())),
            cause=None if data.get("cause") is None else Cause.from_avro(data["cause"]),
        )


@dataclass(frozen=True, slots=True)
class RebalanceKey(AvroModel):
    """The rebalance slot's key (type tag 5, no fields): one rebalance at a time."""


@dataclass(frozen=True, slots=True)
class RebalanceMove(AvroModel):
    """One partition of a rebalance: its replicas when planned, and its target."""

    topic: str
    partition: int
    original_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]

    @property
    def moves_data(self) -> bool:
        """Replicas change (not only their order, which moves just the preferred leader)."""
        return set(self.original_replicas) != set(self.target_replicas)

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(data["topic"], data["partition"], tuple(data["original_replicas"]),
                   tuple(data["target_replicas"]))  # fmt: skip


class RebalanceState(str, Enum):
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"  # no new moves; in-flight ones finish
    COMPLETED = "COMPLETED"
    STOPPED = "STOPPED"

    @property
    def finished(self) -> bool:
        return self in (RebalanceState.COMPLETED, RebalanceState.STOPPED)


@dataclass(frozen=True, slots=True)
class RebalanceValue(AvroModel):
    """A goal-based rebalance: its target moves and limits, and its state."""

    proposal_id: str
    state: RebalanceState
    goals: tuple[str, ...]
    remove_nodes: tuple[int, ...]
    moves: tuple[RebalanceMove, ...]
    max_concurrent_moves_per_node: int
    max_concurrent_moves: int
    max_concurrent_leader_moves: int
    started_ms: int
    updated_ms: int
    controller_epoch: int
    message: str = ""

    def to_avro(self) -> dict[str, Any]:
        data = super(RebalanceValue, self).to_avro()
        data["state"] = self.state.value
        return data

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(
            proposal_id=data["proposal_id"],
            state=RebalanceState(data["state"]),
            goals=tuple(data["goals"]),
            remove_nodes=tuple(data["remove_nodes"]),
            moves=tuple(RebalanceMove.from_avro(m) for m in data["moves"]),
            max_concurrent_moves_per_node=data["max_concurrent_moves_per_node"],
            max_concurrent_moves=data["max_concurrent_moves"],
            max_concurrent_leader_moves=data["max_concurrent_leader_moves"],
            started_ms=data["started_ms"],
            updated_ms=data["updated_ms"],
            controller_epoch=data["controller_epoch"],
            message=data.get("message", ""),
        )
