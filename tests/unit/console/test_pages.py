"""The console's pages as data: fed the controller's own records, with no I/O."""

from __future__ import annotations

from pathlib import Path

from kafkacoord.console import pages
from kafkacoord.console.lag import LagHistory
from kafkacoord.console.live import MetadataTracker
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.spark.lag_history import LAG_SAMPLES, LagRecorder
from kafkacoord.spark.tables import schemas
from tests.unit.controller.support import Cluster
from tests.unit.spark.warehouse_rows import NOW, leader_epochs, put, warehouse


def tracked(cluster: Cluster) -> MetadataTracker:
    tracker = MetadataTracker()
    for record in cluster.log:
        tracker.replay(record)
    return tracker


def scene() -> Cluster:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("orders", assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    return c


def test_overview_counts_and_alerts() -> None:
    c = scene()
    c.ok(api.FenceNode(node_id=3))
    page = pages.overview_page(tracked(c), "__kc_offsets", {"g1": "Stable", "g2": "Empty"})
    assert page["controller"]["node_id"] == 1000
    assert (page["nodes_up"], page["nodes_fenced"], page["nodes_total"]) == (2, 1, 3)
    assert page["partitions"] == 3
    assert set(page["under_replicated"]) == {"orders-1", "orders-2"}
    assert "node 3 is fenced" in page["alerts"]
    # Node 3 was the preferred leader of partition 2: half its preferred partitions moved.
    assert any(a.startswith("node 3:") for a in page["alerts"])
    assert page["groups"] == 2 and page["groups_by_state"] == {"Empty": 1, "Stable": 1}


def test_topic_heat_map_marks_each_replica_role() -> None:
    c = scene()
    c.ok(api.AlterReassignments(reassignments=[
        api.ReassignmentTarget(topic="orders", partition=0, replicas=[3, 2]),
    ]))  # fmt: skip
    page = pages.topic_page(tracked(c), "orders")
    assert page is not None
    roles = {row["node"]: row["cells"] for row in page["heat"]}
    assert roles[1][0] == "leader"  # still leads while the move runs
    assert roles[3][0] == "adding"
    assert roles[2][1] == "leader" and roles[3][1] == "follower"
    assert page["partitions"][0]["adding"] == [3]
    assert pages.topic_page(tracked(c), "missing") is None


def test_reassignments_show_progress_then_the_finished_move() -> None:
    c = scene()
    c.ok(api.AlterReassignments(reassignments=[
        api.ReassignmentTarget(topic="orders", partition=0, replicas=[3, 2]),
    ]))  # fmt: skip
    running = pages.reassignments_page(tracked(c))["running"]
    assert len(running) == 1
    assert running[0]["target"] == [3, 2] and running[0]["caught_up"] == 1
    assert running[0]["progress"] == 0.5
    c.caught_up(3, "orders", 0)
    page = pages.reassignments_page(tracked(c))
    assert page["running"] == []
    [done] = page["finished"]
    assert done["completed"] and done["replicas"] == [3, 2]


def test_history_lists_each_leader_change_newest_first() -> None:
    c = scene()
    c.ok(api.FenceNode(node_id=1))
    rows = pages.history_page(tracked(c))
    assert rows[0]["election"] == "offline" and rows[0]["previous"] == 1
    assert {(r["topic"], r["partition"]) for r in rows if r["election"] == "initial"} == {
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
    }


def test_history_from_a_views_warehouse(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    epochs = leader_epochs("t", 0, (1, "initial"), (2, "offline"), (2, "reassign"))
    put(wh, "leader_epochs", ("topic", "partition", "leader_epoch"), epochs)
    rows = pages.warehouse_history(tmp_path / "wh")
    # Epoch 2 kept the leader: not a change. Newest first.
    assert [(r["previous"], r["leader"], r["election"]) for r in rows] == [
        (1, 2, "offline"),
        (-1, 1, "initial"),
    ]
    assert rows[0]["at_ms"] == NOW + 1


def test_topic_page_shows_eligible_leader_replicas() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("orders", assignment={0: [1, 2]}, configs={"min.insync.replicas": "2"})
    c.ok(api.FenceNode(node_id=2))
    page = pages.topic_page(tracked(c), "orders")
    assert page is not None and page["has_elr"]
    assert page["partitions"][0]["elr"] == [2] and page["partitions"][0]["isr"] == [1]


def test_the_lag_chart_reaches_back_into_the_views_warehouse(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    minute = 60_000
    recorder = LagRecorder(resolution_ms=minute, retain_ms=24 * 60 * minute)
    offsets = [("g", "orders", 0, 0, 10), ("g", "orders", 1, 0, 20), ("other", "orders", 0, 0, 0)]
    for i in range(3):  # three stored minutes, long before the daemon started sampling
        at = NOW - (10 - i) * minute
        ends = {("orders", 0): (at, 15 + i), ("orders", 1): (at, 30)}
        wh.commit({LAG_SAMPLES: recorder.rows(at, offsets, ends)}, schemas())
    stored = pages.warehouse_lag(tmp_path / "wh", "g", now_ms=NOW)
    assert stored == [(NOW - (10 - i) * minute, 5 + i + 10) for i in range(3)]

    ring = LagHistory()
    ring.record("g", NOW - 9 * minute + 1, {("orders", 0): 10}, {("orders", 0): 99})
    series = pages.lag_series("g", ring, stored)
    # Stored points older than the ring's first sample come first; the overlap is the ring's.
    assert series["stored"] == 2
    assert series["lag"] == [15, 16, 89]
    assert series["t"][0] == (NOW - 10 * minute) / 1000
    # No ring yet: everything stored is drawn.
    assert pages.lag_series("g", LagHistory(), stored)["lag"] == [15, 16, 17]


def test_reassignments_page_shows_the_rebalance_and_its_progress() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1], 1: [1], 2: [2]})
    c.ok(api.StartRebalance(proposal_id="grow", moves=[
        api.RebalanceMoveBody(topic="t", partition=0, original_replicas=[1], target_replicas=[3]),
        api.RebalanceMoveBody(topic="t", partition=1, original_replicas=[1], target_replicas=[3]),
    ], max_concurrent_moves_per_node=1))  # fmt: skip
    page = pages.reassignments_page(tracked(c))
    rebalance = page["rebalance"]
    assert (rebalance["proposal_id"], rebalance["state"]) == ("grow", "RUNNING")
    assert (rebalance["in_flight"], rebalance["pending"], rebalance["progress"]) == (1, 1, 0.0)
    assert rebalance["running"] and len(page["running"]) == 1
    c.caught_up(3, "t", 0)
    c.caught_up(3, "t", 1)
    done = pages.reassignments_page(tracked(c))["rebalance"]
    assert (done["state"], done["progress"], done["running"]) == ("COMPLETED", 1.0, False)
