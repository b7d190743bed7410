"""Rebalance proposals from a metadata image, and a running rebalance's status.

The plan is computed here, on the caller's side (the planner may take seconds on a big
cluster, which the controller must not spend); the controller checks that each
partition still has the replicas the plan started from.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from kafkacoord.codecs.models import RebalanceValue
from kafkacoord.coordinator.controller.config import COORDINATOR_ROLE
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.planner import plan_rebalance
from kafkacoord.coordinator.controller.planner_goals import PlanSummary, summarize
from kafkacoord.coordinator.controller.rebalance_execution import MoveStatus, progress
from kafkacoord.coordinator.protocol import controller_api as api

__all__ = ["GOALS", "Limits", "Proposal", "demotion", "proposal", "rebalance_status"]

TP = tuple[str, int]
GOALS = ("rack_spread", "replica_capacity", "replica_distribution", "leader_distribution",
         "minimal_movement")  # fmt: skip


@dataclass(frozen=True)
class Limits:
    max_concurrent_moves_per_node: int = 5
    max_concurrent_moves: int = 100
    max_concurrent_leader_moves: int = 1000


@dataclass(frozen=True)
class Proposal:
    before: dict[TP, list[int]]
    after: dict[TP, list[int]]
    summary: PlanSummary
    remove: tuple[int, ...]
    goals: tuple[str, ...] = GOALS

    @property
    def changed(self) -> list[TP]:
        return sorted(tp for tp, replicas in self.after.items() if replicas != self.before[tp])

    def request(self, limits: Limits, proposal_id: str | None = None) -> api.StartRebalance:
        return api.StartRebalance(
            proposal_id=proposal_id or uuid.uuid4().hex[:12],
            goals=list(self.goals),
            remove_nodes=list(self.remove),
            moves=[
                api.RebalanceMoveBody(topic=t, partition=p, original_replicas=self.before[(t, p)],
                                      target_replicas=self.after[(t, p)])
                for t, p in self.changed
            ],
            max_concurrent_moves_per_node=limits.max_concurrent_moves_per_node,
            max_concurrent_moves=limits.max_concurrent_moves,
            max_concurrent_leader_moves=limits.max_concurrent_leader_moves,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "goals": list(self.goals),
            "remove_nodes": list(self.remove),
            "partitions_changed": len(self.changed),
            "replica_moves": s.moves,
            "replica_moves_lower_bound": s.lower_bound,
            "leader_changes": s.leader_changes,
            "nodes": [
                {"node": n, "replicas_before": s.replicas_before[n],
                 "replicas_after": s.replicas_after[n], "leaders_before": s.leaders_before[n],
                 "leaders_after": s.leaders_after[n]}
                for n in s.replicas_before
            ],
            "moves": [
                {"topic": t, "partition": p, "from": self.before[(t, p)], "to": self.after[(t, p)]}
                for t, p in self.changed
            ],
        }  # fmt: skip


def _placed(image: MetadataImage) -> dict[TP, list[int]]:
    """Every partition of the topics not being deleted, replicas leader first."""
    return {
        (v.topic, v.partition): list(v.replicas)
        for v in image.iter_partitions()
        if v.replicas and not (image.topic(v.topic) and image.topic(v.topic).deleting)  # type: ignore[union-attr]
    }


def _racks(image: MetadataImage, *, coordinators: bool) -> dict[int, str | None]:
    """Live nodes of one kind: kafkacoord daemons (the ``coordinator`` role) hold the
    internal topics and nothing else; service nodes hold the user topics (as placement
    does when a topic is created)."""
    return {
        n: v.rack
        for n, v in image.nodes.items()
        if n in image.live_nodes() and (COORDINATOR_ROLE in v.roles) == coordinators
    }


def proposal(
    image: MetadataImage, remove: Collection[int] = (), *, internal: Collection[str] = ()
) -> Proposal:
    """The planner's target for the whole cluster, draining ``remove``: user topics over
    the service nodes, the ``internal`` topics over the daemons."""
    before = _placed(image)
    unknown = sorted(set(remove) - set(image.nodes))
    if unknown:
        raise ValueError(f"unknown nodes to remove: {unknown}")
    after = dict(before)
    summaries = []
    for coordinators in (False, True):
        part = {tp: r for tp, r in before.items() if (tp[0] in internal) == coordinators}
        nodes = _racks(image, coordinators=coordinators)
        if part and nodes:
            planned = plan_rebalance(part, nodes, remove)
            after.update(planned)
            summaries.append(summarize(part, planned, nodes, remove))
    return Proposal(before, after, _combined(summaries), tuple(sorted(remove)))


def _combined(summaries: list[PlanSummary]) -> PlanSummary:
    """One summary of plans over disjoint sets of topics (and, mostly, of nodes)."""

    def table(name: str) -> dict[int, int]:
        merged: Counter[int] = Counter()
        for s in summaries:
            merged.update(getattr(s, name))
        return {n: merged[n] for n in sorted(merged)}

    return PlanSummary(
        replicas_before=table("replicas_before"),
        replicas_after=table("replicas_after"),
        leaders_before=table("leaders_before"),
        leaders_after=table("leaders_after"),
        moves=sum(s.moves for s in summaries),
        lower_bound=sum(s.lower_bound for s in summaries),
        leader_changes=sum(s.leader_changes for s in summaries),
    )


def demotion(image: MetadataImage, nodes: Collection[int]) -> Proposal:
    """Leadership away from ``nodes`` (Cruise Control's demote): each partition they lead
    by preference lists them last, so no data moves, only preferred leaders."""
    before = _placed(image)
    after = {}
    for tp, replicas in before.items():
        if replicas[0] in nodes and any(r not in nodes for r in replicas):
            after[tp] = [r for r in replicas if r not in nodes] + [r for r in replicas
                                                                   if r in nodes]  # fmt: skip
        else:
            after[tp] = replicas
    racks = {**_racks(image, coordinators=False), **_racks(image, coordinators=True)}
    return Proposal(before, after, summarize(before, after, racks), (), ("leader_demotion",))


def rebalance_status(image: MetadataImage) -> dict[str, Any] | None:
    """The running or last rebalance, with its progress read from the partitions."""
    value: RebalanceValue | None = image.rebalance
    if value is None:
        return None
    found = progress(value, image.partition)
    counts = {status.value: found.counts.get(status, 0) for status in MoveStatus}
    return {
        "proposal_id": value.proposal_id,
        "state": value.state.value,
        "goals": list(value.goals),
        "remove_nodes": list(value.remove_nodes),
        "moves": len(value.moves),
        **counts,
        "data_moves_in_flight": found.moving,
        "in_flight_per_node": dict(sorted(found.per_node.items())),
        "limits": {
            "max_concurrent_moves_per_node": value.max_concurrent_moves_per_node,
            "max_concurrent_moves": value.max_concurrent_moves,
            "max_concurrent_leader_moves": value.max_concurrent_leader_moves,
        },
        "started_ms": value.started_ms,
        "updated_ms": value.updated_ms,
        "message": value.message,
    }
