"""A goal-based rebalance grows a cluster from six nodes to eight across a controller
failover, within its limits at every moment.

Two daemons and eight service nodes on two racks (in-process node agents whose new
followers report caught up after a delay, so moves take time). A topic of 300
partitions at RF 2 lives on nodes 1-6; nodes 7 and 8 join empty. The plan is executed
with limits; once half of its moves are done the active controller is killed with -9.
The next controller resumes from the log: every partition ends on its target, the
replicas are even across the eight nodes, and a replay of the whole metadata log,
record by record, never shows more moves in flight than the limits allow.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkacoord.client.admin.rebalance import Limits, proposal, rebalance_status
from kafkacoord.codecs import decode_record
from kafkacoord.coordinator.controller.image import MetadataImage

from .broker import BrokerControl
from .harness import FailureCluster, SlowReplicas, read_log, report, wait_until

DAEMONS = (100, 101)
OLD_NODES = (1, 2, 3, 4, 5, 6)
NEW_NODES = (7, 8)
TOPIC = "growing"
PARTITIONS = 300
LIMITS = Limits(max_concurrent_moves_per_node=3, max_concurrent_moves=5,
                max_concurrent_leader_moves=40)  # fmt: skip


def rack(node: int) -> str:
    return f"r{node % 2}"


@dataclass
class RebalanceFigures:
    moves: int
    done_at_kill: int
    max_in_flight: int
    max_in_flight_per_node: int
    controller_epoch_before: int
    controller_epoch_after: int
    seconds: float


def _status(cluster: FailureCluster) -> dict[str, Any]:
    status = rebalance_status(cluster.image())
    assert status is not None
    return status


def peak_moves(records: list[tuple[int, bytes | None, bytes | None]]) -> tuple[int, int]:
    """The most data moves in flight, in total and on one node, after any record."""
    image = MetadataImage()
    peak, peak_node = 0, 0
    for _, key, value in records:
        image.apply(*decode_record(key, value))
        moving: Counter[int] = Counter()
        total = 0
        for tp in image.reassigning():
            r = image.partition(*tp).reassignment  # type: ignore[union-attr]
            assert r is not None
            nodes = set(r.original_replicas) ^ set(r.target_replicas)
            if nodes:
                total += 1
                moving.update(nodes)
        peak = max(peak, total)
        peak_node = max(peak_node, max(moving.values(), default=0))
    return peak, peak_node


def run_rebalance_failover(
    broker: BrokerControl, root: Path, *, catch_up_delay_s: float = 0.3
) -> RebalanceFigures:
    started = time.monotonic()
    with FailureCluster(broker, root, offsets_partitions=1) as cluster:
        for node in DAEMONS:
            cluster.start_daemon(node)
        cluster.wait_ready(DAEMONS)
        for node in OLD_NODES:
            cluster.start_node(node, SlowReplicas(catch_up_delay_s), rack=rack(node))
        wait_until(lambda: set(OLD_NODES) <= cluster.image().live_nodes(), what="nodes 1-6 live")
        # Neighbours differ in parity: every partition spans both racks.
        assignment = {p: [1 + p % 6, 1 + (p + 1) % 6] for p in range(PARTITIONS)}
        cluster.admin.create_topic(TOPIC, replica_assignment=assignment)
        for node in NEW_NODES:
            cluster.start_node(node, SlowReplicas(catch_up_delay_s), rack=rack(node))
        wait_until(lambda: set(NEW_NODES) <= cluster.image().live_nodes(), what="nodes 7-8 live")

        planned = proposal(cluster.image(), internal=(cluster.topics.offsets,))
        assert planned.summary.moves >= 140  # 75 replicas each for the two new nodes
        moves = {tp: planned.after[tp] for tp in planned.changed}
        response = cluster.admin.start_rebalance(planned.request(LIMITS, "grow-6-to-8"))
        assert response.state == "RUNNING"
        half = len(moves) // 2
        wait_until(lambda: _status(cluster)["done"] >= half or None, timeout_s=180,
                   what="half of the moves done")  # fmt: skip
        before = cluster.image()
        assert before.controller is not None
        done_at_kill = _status(cluster)["done"]
        assert done_at_kill < len(moves), "the rebalance finished before the controller failed"
        cluster.kill(before.controller.node_id)

        final = wait_until(
            lambda: ((s := _status(cluster))["state"] in ("COMPLETED", "STOPPED") and s) or None,
            timeout_s=300, what="the rebalance finished",
        )  # fmt: skip
        assert final["state"] == "COMPLETED", final
        after = cluster.image()
        assert after.controller is not None and after.controller.epoch > before.controller.epoch
        for (topic, partition), target in moves.items():
            value = after.partition(topic, partition)
            assert value is not None and list(value.replicas) == target, (partition, value)
            assert value.reassignment is None
        counts = Counter(n for v in after.partitions_of(TOPIC) for n in v.replicas)
        assert set(counts) == set(OLD_NODES + NEW_NODES)
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        for v in after.partitions_of(TOPIC):
            assert {rack(n) for n in v.replicas} == {"r0", "r1"}, v  # rack spread kept

        log = read_log(cluster.bootstrap, cluster.topics.metadata, 0, timeout_s=60)
        peak, peak_node = peak_moves(log)
        assert peak <= LIMITS.max_concurrent_moves, peak
        assert peak_node <= LIMITS.max_concurrent_moves_per_node, peak_node
        figures = RebalanceFigures(
            moves=len(moves),
            done_at_kill=done_at_kill,
            max_in_flight=peak,
            max_in_flight_per_node=peak_node,
            controller_epoch_before=before.controller.epoch,
            controller_epoch_after=after.controller.epoch,
            seconds=round(time.monotonic() - started, 1),
        )
    report("rebalance_failover", broker, figures)
    return figures
