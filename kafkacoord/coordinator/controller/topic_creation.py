"""Topic creation: CreateTopics and CreatePartitions (Kafka's ``ReplicationControlManager``).

Replicas are placed by :func:`placement.assign_replicas` on the live service nodes
(Kafka's ``AdminUtils``: random start index, rack-aware unless asked not to), or follow
an explicit, validated assignment. Each partition is born ONLINE (NonExistent -> New ->
Online in one record) with the live replicas as ISR and the first of them as leader, or
stays NEW while none of its replicas is live. See docs/architecture.md#topics-and-partitions.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence

from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol.controller_api import (
    CreatePartitions,
    CreatePartitionsResponse,
    CreateTopic,
    CreateTopicResponse,
)
from kafkacoord.coordinator.protocol.types import MAX_PARTITIONS_PER_BATCH

from .batch import Batch
from .config import ControllerConfig, validate_topic_configs
from .partition_change import put_new_partition
from .placement import (
    AdminOperationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas,
)
from .reassignments import STEP_QUEUED
from .records import new_topic_value, topic_value

__all__ = ["TopicCreator"]


def _nodes_phrase(count: int, what: str) -> str:
    return f"{count} {what} node" if count == 1 else f"{count} {what} nodes"


class TopicCreator:
    """Creates topics and partitions; :mod:`.internal_topics` places through it too."""

    def __init__(self, config: ControllerConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng

    def new_topic_id(self) -> str:
        # From the shard's rng, so a seeded controller is deterministic.
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    # -- placement ---------------------------------------------------------------------------

    def _service_nodes(self, batch: Batch) -> list[int]:
        """Where user topics go: live nodes that are not only kafkacoord daemons, which host
        the group shards and nothing else."""
        roles = {spec.role for spec in self.config.internal_topics}
        return sorted(
            n
            for n in batch.live()
            if not roles or not (set(batch.node(n).roles) & roles)  # type: ignore[union-attr]
        )

    def place(
        self,
        batch: Batch,
        nodes: Sequence[int],
        num_partitions: int,
        replication_factor: int,
        *,
        rack_aware: bool,
        what: str = "live",
        start_partition_id: int = -1,
        fixed_start_index: int = -1,
    ) -> dict[int, tuple[int, ...]]:
        if replication_factor > len(nodes):
            # A newcomer's first topic usually meets this: say what a service node is.
            hint = (
                "; topics are placed on service nodes, processes that embed a NodeAgent: "
                "start one, e.g. `python examples/replicated_service.py --node-id 1`"
                if not nodes and what.startswith("live")
                else ""
            )
            raise ProtocolError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the "
                f"{_nodes_phrase(len(nodes), what)}{hint}",
            )
        racks = {n: batch.node(n).rack for n in nodes}  # type: ignore[union-attr]
        try:
            placed = assign_replicas(
                racks, num_partitions, replication_factor,
                fixed_start_index=fixed_start_index, start_partition_id=start_partition_id,
                rack_aware=None if rack_aware else False, rng=self.rng,
            )  # fmt: skip
        except InvalidReplicationFactorError as exc:
            raise ProtocolError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from exc
        except InvalidPartitionsError as exc:
            raise ProtocolError(ErrorCode.INVALID_PARTITIONS, str(exc)) from exc
        except AdminOperationError as exc:
            raise ProtocolError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from exc
        return {p: tuple(replicas) for p, replicas in placed.items()}

    @staticmethod
    def _validate_assignment(
        batch: Batch,
        assignment: Mapping[int, Sequence[int]],
        partition_ids: range,
        replication_factor: int | None,
    ) -> dict[int, tuple[int, ...]]:
        def invalid(message: str) -> ProtocolError:
            return ProtocolError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

        if sorted(assignment) != list(partition_ids):
            raise invalid(
                f"the replica assignment must name partitions {partition_ids.start}.."
                f"{partition_ids.stop - 1} exactly (got {sorted(assignment)})"
            )
        result: dict[int, tuple[int, ...]] = {}
        for p in partition_ids:
            replicas = tuple(assignment[p])
            if not replicas:
                raise invalid(f"partition {p} has an empty replica list")
            if len(set(replicas)) != len(replicas):
                raise invalid(f"partition {p} has duplicate replicas {list(replicas)}")
            unknown = sorted(n for n in set(replicas) if batch.node(n) is None)
            if unknown:
                raise invalid(f"partition {p} is assigned to unknown nodes {unknown}")
            if replication_factor is None:
                replication_factor = len(replicas)
            elif len(replicas) != replication_factor:
                raise invalid(
                    f"inconsistent replication factor: partition {p} has {len(replicas)} "
                    f"replicas, not {replication_factor}"
                )
            result[p] = replicas
        return result

    # -- requests ------------------------------------------------------------------------------

    def create(self, batch: Batch, body: CreateTopic) -> CreateTopicResponse:
        name = body.name
        if name in (".", ".."):
            raise ProtocolError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal"
            )
        existing = batch.topic(name)
        if existing is not None:
            detail = " and is marked for deletion" if existing.deleting else ""
            raise ProtocolError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists{detail}"
            )
        if self.config.internal_topic(name) is not None:
            raise ProtocolError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"topic name {name!r} is reserved for an internal topic",
            )
        validate_topic_configs(body.configs)
        if body.replica_assignment is not None:
            if body.num_partitions != -1 or body.replication_factor != -1:
                raise ProtocolError(
                    ErrorCode.INVALID_REQUEST,
                    "give either a replica assignment or num_partitions/replication_factor, "
                    "not both",
                )
            count = len(body.replica_assignment)
            if count == 0:
                raise ProtocolError(ErrorCode.INVALID_PARTITIONS, "the replica assignment is empty")
            assignment = self._validate_assignment(
                batch, body.replica_assignment, range(count), None
            )
            replication_factor = len(assignment[0])
        else:
            count = (
                self.config.default_num_partitions
                if body.num_partitions == -1
                else body.num_partitions
            )
            replication_factor = (
                self.config.default_replication_factor
                if body.replication_factor == -1
                else body.replication_factor
            )
            if count <= 0:
                raise ProtocolError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"number of partitions must be larger than 0 (got {count})",
                )
            if replication_factor <= 0:
                raise ProtocolError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor must be larger than 0 (got {replication_factor})",
                )
            assignment = self.place(
                batch, self._service_nodes(batch), count, replication_factor,
                rack_aware=body.rack_aware, what="live service",
            )  # fmt: skip
        topic_id = self.new_topic_id()
        response = CreateTopicResponse(
            topic_id="" if body.validate_only else topic_id,
            assignment={p: list(r) for p, r in assignment.items()},
        )
        if body.validate_only:
            return response
        batch.put_topic(
            new_topic_value(name, topic_id, count, replication_factor,
                            created_ms=batch.now_ms, configs=dict(body.configs))
        )  # fmt: skip
        for p in range(count):
            put_new_partition(batch, name, p, assignment[p])
        return response

    def create_partitions(self, batch: Batch, body: CreatePartitions) -> CreatePartitionsResponse:
        if self.config.internal_topic(body.topic) is not None:
            raise ProtocolError(
                ErrorCode.INVALID_PARTITIONS,
                f"the partition count of internal topic {body.topic!r} is set by configuration",
            )
        topic = batch.topic(body.topic)
        if topic is None or topic.deleting:
            state = "unknown" if topic is None else "being deleted"
            raise ProtocolError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {body.topic!r} is {state}"
            )
        current = topic.num_partitions
        if body.count <= current:
            detail = "already has" if body.count == current else "has"
            raise ProtocolError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {body.topic!r} {detail} {current} partitions; the count can only grow "
                f"(asked for {body.count})",
            )
        adding = body.count - current
        if adding > MAX_PARTITIONS_PER_BATCH:
            # Kafka's own cap on partitions created in one request.
            raise ProtocolError(
                ErrorCode.POLICY_VIOLATION,
                f"adding {adding} partitions to {body.topic!r} exceeds the limit of "
                f"{MAX_PARTITIONS_PER_BATCH} per request",
            )
        first = batch.partition(body.topic, 0)
        if first is None:
            replication_factor = topic.replication_factor
        elif first.reassignment is not None and first.reassignment.step != STEP_QUEUED:
            replication_factor = len(first.reassignment.target_replicas)
        else:
            replication_factor = len(first.replicas)
        if body.assignment is not None:
            if len(body.assignment) != adding:
                raise ProtocolError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"the assignment lists {len(body.assignment)} partitions but {adding} are "
                    "being added",
                )
            assignment = self._validate_assignment(
                batch,
                {current + i: replicas for i, replicas in enumerate(body.assignment)},
                range(current, body.count),
                replication_factor,
            )
        else:
            live = self._service_nodes(batch)
            # Kafka continues the existing layout: start at partition 0's first replica.
            head = first.replicas[0] if first is not None and first.replicas else 0
            start = next((i for i, n in enumerate(live) if n >= head), 0)
            assignment = self.place(
                batch, live, adding, replication_factor, rack_aware=True,
                start_partition_id=current, fixed_start_index=start,
            )  # fmt: skip
        response = CreatePartitionsResponse(assignment={p: list(r) for p, r in assignment.items()})
        if body.validate_only:
            return response
        batch.put_topic(topic_value(topic, num_partitions=body.count))
        for p in range(current, body.count):
            put_new_partition(batch, body.topic, p, assignment[p])
        return response
