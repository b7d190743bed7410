"""``/health``: is this daemon ready to serve what it leads?

Ready means start-up finished, the broker answers, and every shard this daemon leads
(the controller while it holds the lease, and its group-coordinator shards) is ACTIVE.
A standby that leads nothing is ready: it can take over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkacoord.coordinator.runtime.host import HostState

from .status import DaemonStatus, shard_sort_key

READY = "ready"
NOT_READY = "not_ready"


@dataclass(frozen=True, slots=True)
class Health:
    ready: bool
    body: dict[str, Any]

    @property
    def http_status(self) -> int:
        return 200 if self.ready else 503


def evaluate(status: DaemonStatus) -> Health:
    problems: list[str] = []
    if not status.started:
        problems.append("starting: topics, cache or services are not up yet")
    if status.broker_reachable is False:
        problems.append("broker unreachable")
    names = sorted(status.shards, key=shard_sort_key)
    for name in names:
        state = status.shards[name]
        if state is not HostState.ACTIVE:
            problems.append(f"shard {name} is {state.name}")
    controller = status.controller
    ready = not problems
    body: dict[str, Any] = {
        "status": READY if ready else NOT_READY,
        "node_id": status.node_id,
        "started": status.started,
        "broker_reachable": status.broker_reachable,
        "controller": {
            "elected": controller is not None and controller.elected,
            "active": controller is not None and controller.active,
            "epoch": None if controller is None else controller.epoch,
        },
        "shards": {name: status.shards[name].name for name in names},
        "problems": problems,
    }
    return Health(ready, body)


__all__ = ["NOT_READY", "READY", "Health", "evaluate"]
