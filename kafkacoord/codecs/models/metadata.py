"""Records of the controller's decision log (``__kc_metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Self

from .base import AvroModel


@dataclass(frozen=True, slots=True)
class ControllerKey(AvroModel):
    pass


@dataclass(frozen=True, slots=True)
class ControllerValue(AvroModel):
    epoch: int
    node_id: int
    incarnation: str
    activated_ms: int
    endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class NodeKey(AvroModel):
    node_id: int


@dataclass(frozen=True, slots=True)
class NodeValue(AvroModel):
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

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(**{**data, "roles": tuple(data["roles"])})


@dataclass(frozen=True, slots=True)
class TopicKey(AvroModel):
    name: str


@dataclass(frozen=True, slots=True)
class TopicValue(AvroModel):
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
    topic: str
    partition: int


class PartitionState(str, Enum):
    NEW = "NEW"
    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"


@dataclass(frozen=True, slots=True)
class Reassignment(AvroModel):
    """Seed 002's ORS/TRS/AR/RR, persisted so a new controller resumes mid-flight."""

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
        )
