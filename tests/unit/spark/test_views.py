"""The views, computed from hand-built tables (no Spark, no Kafka)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkacoord.spark.assignment import encode_assignment
from kafkacoord.spark.tables import schemas
from kafkacoord.spark.views import read_view

from .warehouse_rows import (
    NOW,
    commit,
    group,
    leader_epochs,
    member,
    node,
    partition,
    put,
    warehouse,
)

DAY = 24 * 3600 * 1000


def rows(wh: Any, name: str, **settings: Any) -> list[dict[str, Any]]:
    return list(read_view(wh, name, now_ms=NOW, **settings).to_pylist())


def test_groups_and_members(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    put(wh, "group_metadata", ("group",), [
        group("busy", [member("m1", encode_assignment({"orders": [1, 0]})),
                       member("m2", b"\x01\x02", host="/10.0.0.2")]),
        group("idle", [], cause={"kind": "member_left", "member_id": "m9", "detail": None}),
    ])  # fmt: skip
    groups = {g["group"]: g for g in rows(wh, "groups")}
    assert groups["busy"]["state"] == "Stable" and groups["busy"]["members"] == 2
    # A record written before causes were recorded has none.
    assert (groups["busy"]["rebalance_cause"], groups["busy"]["rebalance_cause_detail"]) == (
        None,
        None,
    )
    assert (groups["idle"]["rebalance_cause"], groups["idle"]["rebalance_cause_detail"]) == (
        "member_left",
        "member m9",
    )
    assert groups["idle"]["state"] == "Empty" and groups["idle"]["members"] == 0
    assert groups["busy"]["coordinator_shard"] == 1 and groups["busy"]["group_type"] == "classic"
    assert groups["busy"]["group_epoch"] is None
    members = {m["member_id"]: m for m in rows(wh, "group_members")}
    assert members["m1"]["assignment"] == "orders:0,1"
    assert members["m1"]["assigned_partitions"] == 2
    assert members["m2"]["assignment"] == "0x0102"
    assert members["m2"]["assigned_partitions"] is None
    assert members["m2"]["host"] == "/10.0.0.2"


def test_group_offsets_owner_lag_and_expiry(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    put(wh, "group_metadata", ("group",), [
        group("live", [member("m1", encode_assignment({"orders": [0]}))]),
        group("empty", [], state_timestamp_ms=NOW - 8 * DAY),
    ])  # fmt: skip
    put(wh, "offset_commits", ("group", "topic", "partition"), [
        commit("live", "orders", 0, 90, commit_timestamp_ms=NOW - 30 * DAY),  # members: kept
        commit("live", "orders", 1, 40),
        commit("empty", "orders", 0, 10),  # empty for 8 days: expired
        commit("solo", "orders", 0, 5, commit_timestamp_ms=NOW - 8 * DAY),  # standalone: expired
        commit("solo", "orders", 1, 5, expire_timestamp_ms=NOW - 1),  # explicit: expired
        commit("solo2", "orders", 1, 55),
    ])  # fmt: skip
    put(wh, "end_offsets", ("topic", "partition"), [
        {"topic": "orders", "partition": 0, "log_end_offset": 100, "sampled_ms": NOW,
         "history": []},
    ])  # fmt: skip
    got = {(r["group"], r["partition"]): r for r in rows(wh, "group_offsets")}
    assert set(got) == {("live", 0), ("live", 1), ("solo2", 1)}
    live0 = got[("live", 0)]
    assert (live0["current_offset"], live0["log_end_offset"], live0["lag"]) == (90, 100, 10)
    assert live0["consumer_id"] == "m1" and live0["client_id"] == "client-m1"
    assert live0["expire_timestamp"] is None  # a group with members never expires
    assert got[("live", 1)]["consumer_id"] is None  # not assigned to anyone
    assert got[("live", 1)]["log_end_offset"] is None
    assert got[("solo2", 1)]["expire_timestamp"] is not None
    # A longer retention brings the empty group's and the standalone offsets back.
    kept = rows(wh, "group_offsets", retention_ms=10 * DAY)
    assert {(r["group"], r["partition"]) for r in kept} >= {("empty", 0), ("solo", 0)}


def test_lag_status_applies_burrow_to_the_window(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    history = [{"sampled_ms": NOW - 10_000 + i * 1_000, "log_end_offset": 100 + 10 * i}
               for i in range(10)]  # fmt: skip

    def window(*entries: tuple[int, int]) -> list[dict[str, int]]:
        # Newest first, as the fold keeps it.
        return [{"offset": o, "commit_timestamp_ms": t} for o, t in reversed(entries)]

    put(wh, "offset_commits", ("group", "topic", "partition"), [
        # Same offset committed again and again while the log grows: STALL.
        commit("g", "orders", 0, 50, window=window((50, NOW - 9_000), (50, NOW - 5_000),
                                                   (50, NOW - 1_000))),
        # Keeping up: caught up once in the window: OK.
        commit("g", "orders", 1, 190, window=window((110, NOW - 9_000), (150, NOW - 5_000),
                                                    (190, NOW - 1_000))),
        # One commit a second ago, below every sampled end offset since: stopped.
        commit("h", "orders", 1, 90, window=window((90, NOW - 1_000))),
    ])  # fmt: skip
    put(wh, "end_offsets", ("topic", "partition"), [
        {"topic": "orders", "partition": p, "log_end_offset": 200, "sampled_ms": NOW,
         "history": history}
        for p in (0, 1)
    ])  # fmt: skip
    got = {(r["group"], r["partition"]): r for r in rows(wh, "lag_status")}
    assert got[("g", 0)]["status"] == "STALL"
    assert got[("g", 0)]["current_lag"] == 150
    assert got[("g", 1)]["status"] == "OK"
    assert got[("g", 1)]["group_worst"] == "STALL" and got[("g", 1)]["group_status"] == "ERR"
    assert got[("g", 0)]["window_commits"] == 3
    assert got[("g", 0)]["complete"] == 0.3 and got[("g", 0)]["group_complete"] == 0.0
    assert got[("h", 1)]["status"] == "STOP" and got[("h", 1)]["group_status"] == "ERR"
    # Burrow's allowed-lag: a current lag of 150 within it is OK; the settings the job
    # recorded in the manifest apply when the view is read.
    allowed = {(r["group"], r["partition"]): r for r in rows(wh, "lag_status", allowed_lag=150)}
    assert allowed[("g", 0)]["status"] == "OK" and allowed[("g", 0)]["group_status"] == "OK"
    assert allowed[("h", 1)]["status"] == "OK"  # its lag of 110 too
    wh.commit({}, schemas(), settings={"allowed_lag": 150, "window": 3})
    recorded = {(r["group"], r["partition"]): r for r in rows(wh, "lag_status")}
    assert recorded[("g", 0)]["status"] == "OK"
    assert recorded[("g", 0)]["complete"] == 1.0 and recorded[("g", 0)]["group_complete"] == 1.0


def test_partitions_and_brokers(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    put(wh, "nodes", ("node_id",), [node(1, rack="a"), node(2, rack="b"), node(3, fenced=True)])
    reassignment = {"original_replicas": [1, 2], "target_replicas": [2, 3],
                    "adding_replicas": [3], "removing_replicas": [1], "step": "A2",
                    "started_ms": NOW}  # fmt: skip
    put(wh, "partition_states", ("topic", "partition"), [
        partition("t", 0, [1, 2], 1),
        partition("t", 1, [1, 2], 2, isr=[2]),  # not led by its preferred replica; 1 out of ISR
        partition("t", 2, [1, 2, 3], 3, isr=[3], reassignment=reassignment),  # leader fenced
        partition("t", 3, [2, 1], -1, isr=[]),
        partition("gone", 0, [1], 2),  # a topic being deleted is left out of brokers
    ])  # fmt: skip
    put(wh, "topics", ("name",), [{"name": "gone", "topic_id": "x", "num_partitions": 1,
                                   "replication_factor": 1, "configs": {}, "deleting": True,
                                   "created_ms": NOW, "controller_epoch": 1}])  # fmt: skip
    parts = {(p["topic"], p["partition"]): p for p in rows(wh, "partitions")}
    assert parts[("t", 0)]["is_preferred"] and not parts[("t", 0)]["under_replicated"]
    assert parts[("t", 1)]["preferred_leader"] == 1 and not parts[("t", 1)]["is_preferred"]
    assert parts[("t", 1)]["under_replicated"] and not parts[("t", 1)]["unavailable"]
    assert parts[("t", 2)]["unavailable"]  # its leader, node 3, is fenced
    assert parts[("t", 2)]["reassignment_in_progress"]
    assert parts[("t", 2)]["adding_replicas"] == [3]
    assert parts[("t", 3)]["unavailable"]
    assert parts[("gone", 0)]["topic_deleting"]
    brokers = {b["node"]: b for b in rows(wh, "brokers")}
    # Node 1 prefers t-0, t-1, t-2 and leads only t-0: 2/3 > 10%.
    assert brokers[1]["preferred_leaders"] == 3 and brokers[1]["leaders"] == 1
    assert abs(brokers[1]["imbalance_ratio"] - 2 / 3) < 1e-9
    assert brokers[1]["would_trigger_rebalance"]
    assert brokers[1]["rebalance_candidates"] == 0  # node 1 is in neither ISR
    assert brokers[2]["preferred_leaders"] == 1 and brokers[2]["imbalance_ratio"] == 1.0
    assert brokers[3]["alive"] is False and brokers[3]["leaders"] == 1
    assert brokers[1]["rack"] == "a"
    # With a 70% threshold node 1 is balanced enough.
    assert not {b["node"]: b for b in rows(wh, "brokers", imbalance_percent=70.0)}[1][
        "would_trigger_rebalance"
    ]


def test_leadership_history_pairs_each_epoch_with_the_leader_before(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    epochs = leader_epochs("t", 0, (1, "new"), (2, "offline"), (2, "reassign"), (1, "preferred"))
    put(wh, "leader_epochs", ("topic", "partition", "leader_epoch"), epochs)
    history = rows(wh, "leadership_history")
    assert [(h["old_leader"], h["new_leader"], h["leader_changed"]) for h in history] == [
        (None, 1, True),
        (1, 2, True),
        (2, 2, False),
        (2, 1, True),
    ]
    assert [h["election"] for h in history] == ["new", "offline", "reassign", "preferred"]


def _consumer_member(group: str, member_id: str, topics: list[str], **extra: Any) -> dict[str, Any]:
    return {"group": group, "member_id": member_id, "client_id": f"client-{member_id}",
            "client_host": "/10.0.0.9", "subscribed_topic_names": topics,
            "rebalance_timeout_ms": 30_000, "shard": 2, **extra}  # fmt: skip


def _assignment(group: str, member_id: str, epoch: int, state: int,
                partitions: dict[str, list[int]]) -> dict[str, Any]:  # fmt: skip
    return {"group": group, "member_id": member_id, "member_epoch": epoch,
            "previous_member_epoch": epoch, "state": state,
            "assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in partitions.items()],
            "partitions_pending_revocation": [], "shard": 2}  # fmt: skip


def test_consumer_protocol_groups_in_the_group_views(tmp_path: Path) -> None:
    wh = warehouse(tmp_path)
    put(wh, "consumer_groups", ("group",), [
        {"group": "kip848", "epoch": 5, "shard": 2,
         "cause": {"kind": "subscribed_topic_changed", "group_instance_id": "i1",
                   "member_id": "a", "detail": "orders 6 → 8 partitions"}},
        {"group": "moving", "epoch": 7, "shard": 2},
        {"group": "gone", "epoch": 2, "shard": 2},
    ])  # fmt: skip
    put(wh, "consumer_group_target_epochs", ("group",), [
        {"group": "kip848", "assignment_epoch": 5}, {"group": "moving", "assignment_epoch": 7},
        {"group": "gone", "assignment_epoch": 2},
    ])  # fmt: skip
    put(wh, "consumer_group_members", ("group", "member_id"), [
        _consumer_member("kip848", "a", ["orders"], server_assignor="range"),
        _consumer_member("kip848", "b", [], subscribed_topic_regex="pay.*"),
        _consumer_member("moving", "c", ["orders"]),
    ])  # fmt: skip
    put(wh, "consumer_group_assignments", ("group", "member_id"), [
        _assignment("kip848", "a", 5, 2, {"orders": [1, 0]}),
        _assignment("kip848", "b", 5, 2, {"payments": [0]}),
        _assignment("moving", "c", 6, 0, {"orders": [2]}),  # still revoking at epoch 6
    ])  # fmt: skip
    put(wh, "consumer_group_targets", ("group", "member_id"), [
        {"group": "kip848", "member_id": "a", "partitions": [{"topic": "orders",
                                                              "partitions": [0]}]},
    ])  # fmt: skip
    put(wh, "offset_commits", ("group", "topic", "partition"), [
        commit("kip848", "orders", 0, 90, commit_timestamp_ms=NOW - 30 * DAY),  # subscribed
        commit("kip848", "payments", 0, 7, commit_timestamp_ms=NOW - 30 * DAY),  # by regex
        commit("kip848", "old-topic", 0, 3, commit_timestamp_ms=NOW - 30 * DAY),  # expired
    ])  # fmt: skip
    groups = {g["group"]: g for g in rows(wh, "groups")}
    assert (groups["kip848"]["state"], groups["kip848"]["protocol"]) == ("Stable", "range")
    assert (groups["kip848"]["generation"], groups["kip848"]["members"]) == (5, 2)
    assert groups["kip848"]["protocol_type"] == "consumer"
    assert groups["moving"]["state"] == "Reconciling"
    assert groups["kip848"]["rebalance_cause"] == "subscribed_topic_changed"
    assert groups["kip848"]["rebalance_cause_detail"] == "member i1; orders 6 → 8 partitions"
    assert groups["moving"]["rebalance_cause"] is None
    assert (groups["gone"]["state"], groups["gone"]["members"]) == ("Empty", 0)
    members = {m["member_id"]: m for m in rows(wh, "group_members")}
    assert members["a"]["assignment"] == "orders:0,1" and members["a"]["assigned_partitions"] == 2
    assert members["b"]["assignment"] == "payments:0" and members["c"]["coordinator_shard"] == 2
    assert (members["c"]["member_epoch"], members["c"]["member_state"]) == (
        6,
        "UNREVOKED_PARTITIONS",
    )
    assert members["a"]["target_assignment"] == "orders:0"
    assert groups["moving"]["group_type"] == "consumer"
    assert (groups["moving"]["group_epoch"], groups["moving"]["target_assignment_epoch"]) == (7, 7)
    offsets = {(r["topic"], r["partition"]): r for r in rows(wh, "group_offsets")}
    assert set(offsets) == {("orders", 0), ("payments", 0)}
    assert offsets[("orders", 0)]["consumer_id"] == "a"
    assert offsets[("orders", 0)]["expire_timestamp"] is None
