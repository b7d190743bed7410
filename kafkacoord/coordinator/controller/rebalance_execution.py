"""Goal-based rebalance execution (Cruise Control's executor), kept as controller state.

The client plans (:func:`.planner.plan_rebalance` over the metadata image) and sends
the moves with the replicas each partition had when planned; a partition that changed
since is refused, so a stale plan never runs. The controller keeps the rebalance as one
``RebalanceValue`` record and starts its moves as ordinary reassignments, within limits:

- ``max_concurrent_moves``: partitions moving data at once;
- ``max_concurrent_moves_per_node``: moving partitions that add or drop a replica on
  one node at once;
- ``max_concurrent_leader_moves``: order-only moves and preferred elections per step
  (they move no data: one partition record each).

Progress is not recorded: a move is *pending* while its partition still has the planned
replicas, *in flight* while its reassignment heads for the target, *done* once the
partition has the target, and *diverged* when something else changed the partition.
So a new controller resumes from the image alone, and the limits are counted from the
partitions themselves at every step. ``stop`` starts nothing more; moves in flight
finish (Kafka's reassignments have no clean mid-copy rollback that would be safer).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from kafkacoord.codecs.models import (
    PartitionValue,
    RebalanceMove,
    RebalanceState,
    RebalanceValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import controller_api as api

from .batch import Batch
from .partition_change import partition_change
from .reassignments import ReassignmentManager, checked_target
from .records import EPOCH_FROM_BATCH, rebalance_value

__all__ = [
    "EXECUTE_TIMER",
    "MoveStatus",
    "Progress",
    "RebalanceExecutor",
    "move_status",
    "progress",
]

log = logging.getLogger(__name__)

EXECUTE_TIMER: Final = "rebalance-execute"
Lookup = Callable[[str, int], PartitionValue | None]
# Safety net: a step also runs on every partition change; the timer catches the rest.
STEP_INTERVAL_MS: Final = 1_000
_SHOWN: Final = 5


class MoveStatus(Enum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DONE = "done"
    DIVERGED = "diverged"


def move_status(move: RebalanceMove, current: PartitionValue | None) -> MoveStatus:
    if current is None:
        return MoveStatus.DIVERGED  # the topic was deleted
    moving = current.reassignment
    if moving is not None:
        heads_for_target = moving.target_replicas == move.target_replicas
        return MoveStatus.IN_FLIGHT if heads_for_target else MoveStatus.DIVERGED
    if current.replicas == move.target_replicas:
        return MoveStatus.DONE
    if current.replicas == move.original_replicas:
        return MoveStatus.PENDING
    return MoveStatus.DIVERGED


def nodes_of(move: RebalanceMove) -> frozenset[int]:
    """The nodes a data move adds a replica to or drops one from."""
    return frozenset(move.original_replicas).symmetric_difference(move.target_replicas)


@dataclass
class Progress:
    """Where a rebalance stands, counted from the partitions."""

    counts: Counter[MoveStatus] = field(default_factory=Counter)
    # Data moves in flight, in total and per node they add to or drop from.
    moving: int = 0
    per_node: Counter[int] = field(default_factory=Counter)
    pending: list[RebalanceMove] = field(default_factory=list)
    # Done moves whose target's first replica does not lead yet.
    unled: list[RebalanceMove] = field(default_factory=list)

    @property
    def in_flight(self) -> int:
        return self.counts[MoveStatus.IN_FLIGHT]


def progress(rebalance: RebalanceValue, lookup: Lookup) -> Progress:
    """``lookup``: a partition's current value (a batch's or an image's ``partition``)."""
    found = Progress()
    for move in rebalance.moves:
        current = lookup(move.topic, move.partition)
        status = move_status(move, current)
        found.counts[status] += 1
        if status is MoveStatus.PENDING:
            found.pending.append(move)
        elif status is MoveStatus.IN_FLIGHT and move.moves_data:
            found.moving += 1
            found.per_node.update(nodes_of(move))
        elif (
            status is MoveStatus.DONE
            and current is not None
            and current.leader != move.target_replicas[0]
        ):
            found.unled.append(move)
    return found


class RebalanceExecutor:
    """Starts, steps and stops the cluster's one goal-based rebalance."""

    def __init__(self, reassignments: ReassignmentManager) -> None:
        self.reassignments = reassignments

    # -- requests --------------------------------------------------------------------------

    def start(self, batch: Batch, body: api.StartRebalance) -> api.StartRebalanceResponse:
        running = batch.rebalance()
        if running is not None and not running.state.finished:
            done = progress(running, batch.partition).counts[MoveStatus.DONE]
            raise ProtocolError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"rebalance {running.proposal_id} is {running.state.value} ({done}/"
                f"{len(running.moves)} moves done): wait for it or stop it "
                f"(kafkacoord rebalance stop)",
            )
        moves = self._validated(batch, body)
        value = RebalanceValue(
            proposal_id=body.proposal_id,
            state=RebalanceState.RUNNING if moves else RebalanceState.COMPLETED,
            goals=tuple(body.goals),
            remove_nodes=tuple(body.remove_nodes),
            moves=tuple(moves),
            max_concurrent_moves_per_node=body.max_concurrent_moves_per_node,
            max_concurrent_moves=body.max_concurrent_moves,
            max_concurrent_leader_moves=body.max_concurrent_leader_moves,
            started_ms=batch.now_ms,
            updated_ms=batch.now_ms,
            controller_epoch=EPOCH_FROM_BATCH,
            message="" if moves else "nothing to move: the cluster already meets the goals",
        )
        batch.put_rebalance(value)
        log.info("rebalance %s started: %d moves", value.proposal_id, len(moves))
        self.step(batch)
        return api.StartRebalanceResponse(
            proposal_id=value.proposal_id, moves=len(moves), state=value.state.value
        )

    def stop(self, batch: Batch, body: api.StopRebalance) -> api.StopRebalanceResponse:
        running = batch.rebalance()
        if running is None or running.state.finished:
            raise ProtocolError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no rebalance is running")
        if body.proposal_id is not None and body.proposal_id != running.proposal_id:
            raise ProtocolError(
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"rebalance {body.proposal_id} is not running ({running.proposal_id} is)",
            )
        if running.state is RebalanceState.RUNNING:
            self._put(batch, running, RebalanceState.STOPPING, "stopped by request")
        self.step(batch)
        now = batch.rebalance()
        assert now is not None
        return api.StopRebalanceResponse(proposal_id=now.proposal_id, state=now.state.value)

    def _validated(self, batch: Batch, body: api.StartRebalance) -> list[RebalanceMove]:
        moves: list[RebalanceMove] = []
        seen: set[tuple[str, int]] = set()
        stale: list[str] = []
        for m in body.moves:
            key = (m.topic, m.partition)
            name = f"{m.topic}-{m.partition}"
            if key in seen:
                raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{name} appears twice in the plan")
            seen.add(key)
            current = batch.partition(m.topic, m.partition)
            if current is None:
                raise ProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name} does not exist")
            target = checked_target(batch, name, m.target_replicas)
            if current.replicas != tuple(m.original_replicas) or current.reassignment is not None:
                stale.append(name)
                continue
            if target != current.replicas:
                moves.append(RebalanceMove(m.topic, m.partition, current.replicas, target))
        if stale:
            shown = ", ".join(stale[:_SHOWN]) + (" …" if len(stale) > _SHOWN else "")
            raise ProtocolError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"the placement changed since the plan ({len(stale)} partitions: {shown}); "
                f"plan again",
            )
        return moves

    # -- execution -------------------------------------------------------------------------

    def step(self, batch: Batch) -> bool:
        """Start what the limits allow and finish the rebalance when nothing is left;
        ``True`` while it still runs."""
        rebalance = batch.rebalance()
        if rebalance is None or rebalance.state.finished:
            return False
        found = progress(rebalance, batch.partition)
        if rebalance.state is RebalanceState.RUNNING:
            leader_moves = self._start_moves(batch, rebalance, found)
            self._elect_preferred(batch, rebalance, found, leader_moves)
            rebalance = batch.rebalance() or rebalance  # refused moves may have left it
            found = progress(rebalance, batch.partition)
        if found.in_flight == 0 and (
            rebalance.state is RebalanceState.STOPPING or not found.pending
        ):
            final = (RebalanceState.COMPLETED if rebalance.state is RebalanceState.RUNNING
                     else RebalanceState.STOPPED)  # fmt: skip
            diverged = found.counts[MoveStatus.DIVERGED]
            note = rebalance.message
            if diverged:
                note = f"{note}; " if note else ""
                note += f"{diverged} partitions changed by something else were left alone"
            self._put(batch, rebalance, final, note)
            log.info("rebalance %s %s: %s", rebalance.proposal_id, final.value, dict(found.counts))
            return False
        return True

    def _start_moves(self, batch: Batch, rebalance: RebalanceValue, found: Progress) -> int:
        """Start pending moves within the limits; returns the order-only moves made."""
        leader_moves = 0
        moving, per_node = found.moving, found.per_node
        refused: dict[RebalanceMove, str] = {}
        step_of = _steps(rebalance)
        for move in found.pending:
            current = batch.partition(move.topic, move.partition)
            assert current is not None
            if not move.moves_data:
                if leader_moves >= rebalance.max_concurrent_leader_moves:
                    continue
                # One record: the new order, and the new first replica leads if it can.
                with batch.because(step_of(move)):
                    change = partition_change(batch, current).set_replicas(move.target_replicas)
                    change.elect_preferred(batch.live())
                    change.put()
                leader_moves += 1
                continue
            if moving >= rebalance.max_concurrent_moves:
                continue
            nodes = nodes_of(move)
            if any(per_node[n] >= rebalance.max_concurrent_moves_per_node for n in nodes):
                continue
            try:
                with batch.because(step_of(move)):
                    self.reassignments.alter_one(batch, move.topic, move.partition,
                                                 move.target_replicas)  # fmt: skip
            except ProtocolError as exc:
                refused[move] = f"{move.topic}-{move.partition}: {exc.message}"
                continue
            after = batch.partition(move.topic, move.partition)
            if after is not None and after.reassignment is not None:
                moving += 1
                per_node.update(nodes)
        if refused:  # dropped from the plan, or it would wait for them forever
            for reason in refused.values():
                log.warning("rebalance %s: not moved: %s", rebalance.proposal_id, reason)
            shown = "; ".join(list(refused.values())[:_SHOWN])
            note = f"{rebalance.message}; " if rebalance.message else ""
            self._put(batch, rebalance, rebalance.state, f"{note}not moved: {shown}",
                      moves=tuple(m for m in rebalance.moves if m not in refused))  # fmt: skip
        return leader_moves

    @staticmethod
    def _elect_preferred(
        batch: Batch, rebalance: RebalanceValue, found: Progress, used: int
    ) -> None:
        """Done moves whose new first replica does not lead yet: elect it (the planner
        balanced preferred leaders, so they should lead)."""
        live = batch.live()
        budget = rebalance.max_concurrent_leader_moves - used
        step_of = _steps(rebalance)
        for move in found.unled:
            if budget <= 0:
                return
            current = batch.partition(move.topic, move.partition)
            if current is None or current.reassignment is not None:
                continue
            with batch.because(step_of(move)):
                change = partition_change(batch, current)
                if change.elect_preferred(live) and change.leader != current.leader:
                    change.put()
                    budget -= 1

    @staticmethod
    def _put(
        batch: Batch,
        old: RebalanceValue,
        state: RebalanceState,
        message: str,
        *,
        moves: tuple[RebalanceMove, ...] | None = None,
    ) -> None:
        batch.put_rebalance(rebalance_value(old, state, message, batch.now_ms, moves=moves))


def _steps(rebalance: RebalanceValue) -> Callable[[RebalanceMove], Trigger]:
    """The cause of a move's records: the plan, and the move's place in it (from 1)."""
    index = {move: i for i, move in enumerate(rebalance.moves, 1)}

    def trigger(move: RebalanceMove) -> Trigger:
        return Trigger(TriggerKind.REBALANCE_PLAN, plan_id=rebalance.proposal_id,
                       plan_step=index.get(move, -1))  # fmt: skip

    return trigger
