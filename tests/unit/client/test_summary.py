"""The ``kafkacoord status`` summary, from a controller's real metadata image."""

from __future__ import annotations

import json

from kafkacoord.cli.status import render
from kafkacoord.client.admin.summary import FIRST, cluster_summary, group_lag
from kafkacoord.coordinator.protocol import controller_api as api
from tests.unit.controller.support import Cluster

OFFSETS = "__kc_offsets"


def cluster() -> Cluster:
    c = Cluster()
    c.register(1, roles=["coordinator"], rack="r1")
    c.register(2, roles=["coordinator"])
    c.register(3)
    c.create(OFFSETS, assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    c.create("orders", assignment={0: [3]})
    c.ok(api.FenceNode(node_id=3))
    return c


def test_summary_of_a_cluster_with_a_fenced_node() -> None:
    c = cluster()
    groups = {"billing": "Stable", "audit": "Empty", "etl": "Stable"}
    lags = {"billing": 42, "audit": 0, "etl": None}
    summary = cluster_summary(c.shard.image, OFFSETS, groups, lags)
    json.dumps(summary)  # JSON-ready as it is

    assert summary["controller"]["node_id"] == 1000
    assert summary["controller"]["epoch"] == c.shard.epoch
    assert [(n["id"], n["state"], n["roles"]) for n in summary["nodes"]] == [
        (1, "live", ["coordinator"]), (2, "live", ["coordinator"]), (3, "fenced", []),
    ]  # fmt: skip
    shards = {s["partition"]: (s["leader"], s["isr"]) for s in summary["offsets_shards"]}
    assert shards == {0: (1, [1, 2]), 1: (2, [2]), 2: (1, [1])}

    partitions = summary["partitions"]
    assert partitions["total"] == 4
    under = partitions["under_replicated"]
    # Both shards lost node 3 from their ISR; so did orders-0, whose last ISR member moved
    # to its ELR (KIP-966, as in Kafka 4.1).
    assert [(p["topic"], p["partition"]) for p in under["first"]] == [
        (OFFSETS, 1), (OFFSETS, 2), ("orders", 0)
    ]  # fmt: skip
    assert under["count"] == 3
    offline = partitions["offline"]
    assert offline["count"] == 1
    assert offline["first"][0]["topic"] == "orders" and offline["first"][0]["leader"] == -1

    assert summary["groups"]["count"] == 3
    assert summary["groups"]["by_state"] == {"Empty": 1, "Stable": 2}
    assert summary["groups"]["total_lag"] == 42


def test_problem_lists_are_capped() -> None:
    c = Cluster()
    c.add_nodes([1])
    c.create("wide", partitions=FIRST + 3)
    c.ok(api.FenceNode(node_id=1))
    offline = cluster_summary(c.shard.image, OFFSETS, {}, {})["partitions"]["offline"]
    assert offline["count"] == FIRST + 3
    assert len(offline["first"]) == FIRST


def test_groups_that_could_not_be_listed() -> None:
    summary = cluster_summary(cluster().shard.image, OFFSETS, None, {}, groups_error="timed out")
    assert summary["groups"]["count"] is None
    assert summary["groups"]["error"] == "timed out"
    assert "Groups: unknown (timed out)" in "\n".join(render(summary))


def test_text_output() -> None:
    summary = cluster_summary(
        cluster().shard.image, OFFSETS, {"billing": "Stable", "etl": "Empty"},
        {"billing": 42, "etl": 7},
    )  # fmt: skip
    lines = render(summary)
    text = "\n".join(lines)
    assert lines[0].startswith("Controller: node 1000, epoch 0")
    assert "Nodes: 3 (2 live, 1 fenced, 0 shutting down)" in text
    assert "Group shards: 3 (leaders node 1: 2, node 2: 1)" in text
    assert "Partitions: 4 total, 3 under-replicated, 1 offline" in text
    # The ISR's last member left it for the ELR: it may lead cleanly when it is back.
    assert "  offline: orders-0  leader none  replicas 3  isr -  elr 3" in text
    assert "Groups: 2 (Empty: 1, Stable: 1), total lag 49" in text
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GROUP"])
    assert [line.split() for line in lines[header + 1 :]] == [
        ["billing", "Stable", "42"], ["etl", "Empty", "7"],
    ]  # fmt: skip


def test_group_lag() -> None:
    ends = {("t", 0): 100, ("t", 1): 5}
    assert group_lag({("t", 0): 90, ("t", 1): 5}, ends) == 10
    assert group_lag({("t", 0): 120}, ends) == 0  # a commit past the end is no negative lag
    assert group_lag({("u", 0): 1}, ends) is None
    assert group_lag({}, ends) == 0
