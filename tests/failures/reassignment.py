"""A reassignment survives a controller failover mid-flight.

Three daemons and six service nodes (in-process node agents whose new followers report
caught up only after a delay, so the reassignment is still moving when the controller
dies). A logical topic's partitions get new replica sets: one moves to three new nodes,
one keeps one replica, one shrinks to two. The active controller is killed with -9
right after the reassignment was accepted. The next controller resumes it from the
log: every partition ends on exactly its target replicas (TRS) with its leader in the
TRS, ISR within the TRS, nothing adding or removing, and the nodes that left hold no
replica any more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from kafkacoord.codecs.models import PartitionValue
from kafkacoord.coordinator.protocol import ErrorCode

from .broker import BrokerControl
from .harness import FailureCluster, SlowReplicas, report, wait_until

DAEMONS = (100, 101, 102)
NODES = (1, 2, 3, 4, 5, 6)
TOPIC = "moving"
ORIGINAL = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
TARGET = {0: (4, 5, 6), 1: (5, 6, 2), 2: (3, 4)}


@dataclass
class ReassignmentFigures:
    partitions_reassigned: int
    in_flight_at_kill: int
    controller_epoch_before: int
    controller_epoch_after: int
    seconds: float


def _done(cluster: FailureCluster) -> dict[int, PartitionValue] | None:
    values = {v.partition: v for v in cluster.image().partitions_of(TOPIC)}
    finished = all(
        p in values and values[p].reassignment is None and values[p].replicas == target
        for p, target in TARGET.items()
    )
    return values if finished else None


def run_reassignment_failover(
    broker: BrokerControl, root: Path, *, catch_up_delay_s: float = 2.0
) -> ReassignmentFigures:
    started = time.monotonic()
    with FailureCluster(broker, root, offsets_partitions=1) as cluster:
        for node in DAEMONS:
            cluster.start_daemon(node)
        cluster.wait_ready(DAEMONS)
        for node in NODES:
            cluster.start_node(node, SlowReplicas(catch_up_delay_s))
        wait_until(lambda: set(NODES) <= cluster.image().live_nodes(), what="service nodes live")
        created = cluster.admin.create_topic(TOPIC, replica_assignment=ORIGINAL)
        assert created.assignment == ORIGINAL
        wait_until(
            lambda: all(cluster.replicas[r[0]].roles.get((TOPIC, p)) == "leader"
                        for p, r in ORIGINAL.items()),
            what="the preferred leaders lead",
        )  # fmt: skip

        results = cluster.admin.alter_reassignments({(TOPIC, p): t for p, t in TARGET.items()})
        assert [(r.partition, r.error) for r in sorted(results, key=lambda r: r.partition)] == [
            (p, ErrorCode.NONE) for p in sorted(TARGET)
        ]
        before = cluster.image()
        assert before.controller is not None
        in_flight = len(before.reassigning())
        assert in_flight > 0, "the reassignment finished before the controller could fail"
        cluster.kill(before.controller.node_id)

        done = wait_until(lambda: _done(cluster), timeout_s=120, what="reassignment completed")
        after = cluster.image()
        assert after.controller is not None
        assert after.controller.epoch > before.controller.epoch
        assert after.controller.node_id != before.controller.node_id
        for p, target in TARGET.items():
            value = done[p]
            assert value.leader in target, f"{TOPIC}-{p}: leader {value.leader} not in {target}"
            assert set(value.isr) <= set(target), f"{TOPIC}-{p}: ISR {value.isr} not in {target}"
        assert after.reassigning() == set()

        # The nodes act on it too: the target replicas hold the partition, the others don't.
        def nodes_follow() -> bool:
            now = {v.partition: v for v in cluster.image().partitions_of(TOPIC)}
            for p, target in TARGET.items():
                leader = now[p].leader
                for node in NODES:
                    role = cluster.replicas[node].roles.get((TOPIC, p))
                    want = (
                        None if node not in target else "leader" if node == leader else "follower"
                    )
                    if role != want:
                        return False
            return True

        wait_until(nodes_follow, timeout_s=60, what="the nodes' replicas match the targets")
        figures = ReassignmentFigures(
            partitions_reassigned=len(TARGET),
            in_flight_at_kill=in_flight,
            controller_epoch_before=before.controller.epoch,
            controller_epoch_after=after.controller.epoch,
            seconds=round(time.monotonic() - started, 1),
        )
    report("reassignment_failover", broker, figures)
    return figures
