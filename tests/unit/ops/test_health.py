"""Readiness: started, broker reachable, and every shard this daemon leads ACTIVE."""

from __future__ import annotations

from kafkacoord.coordinator.runtime.host import HostState
from kafkacoord.server.ops.health import NOT_READY, READY, evaluate
from kafkacoord.server.ops.status import ControllerStatus, DaemonStatus, shard_sort_key

ACTIVE, LOADING, STOPPED = HostState.ACTIVE, HostState.LOADING, HostState.STOPPED
CONTROLLER = ControllerStatus(elected=True, active=True, epoch=4, activations=1)


def test_ready_when_every_led_shard_is_active() -> None:
    status = DaemonStatus(
        node_id=3, started=True, broker_reachable=True, controller=CONTROLLER,
        shards={"offsets-10": ACTIVE, "controller": ACTIVE, "offsets-2": ACTIVE},
    )  # fmt: skip
    health = evaluate(status)
    assert health.ready and health.http_status == 200
    assert health.body["status"] == READY
    assert health.body["controller"] == {"elected": True, "active": True, "epoch": 4}
    assert list(health.body["shards"]) == ["controller", "offsets-2", "offsets-10"]
    assert set(health.body["shards"].values()) == {"ACTIVE"}
    assert health.body["problems"] == []


def test_a_loading_or_stopped_shard_is_not_ready() -> None:
    status = DaemonStatus(
        node_id=3, started=True, broker_reachable=True, controller=CONTROLLER,
        shards={"controller": ACTIVE, "offsets-0": LOADING, "offsets-1": STOPPED},
    )  # fmt: skip
    health = evaluate(status)
    assert health.http_status == 503
    assert health.body["status"] == NOT_READY
    assert health.body["shards"]["offsets-0"] == "LOADING"
    assert health.body["problems"] == ["shard offsets-0 is LOADING", "shard offsets-1 is STOPPED"]


def test_starting_or_broker_down_is_not_ready() -> None:
    assert evaluate(DaemonStatus(node_id=0, started=False)).http_status == 503
    down = evaluate(DaemonStatus(node_id=0, started=True, broker_reachable=False))
    assert down.http_status == 503
    assert down.body["problems"] == ["broker unreachable"]
    assert down.body["controller"] == {"elected": False, "active": False, "epoch": None}


def test_a_standby_that_leads_nothing_is_ready() -> None:
    standby = ControllerStatus(elected=False, active=False, epoch=None, activations=0)
    health = evaluate(
        DaemonStatus(node_id=1, started=True, broker_reachable=True, controller=standby)
    )
    assert health.ready
    assert health.body["shards"] == {}


def test_shard_order() -> None:
    names = ["offsets-10", "offsets-9", "controller", "offsets-0"]
    assert sorted(names, key=shard_sort_key) == [
        "controller",
        "offsets-0",
        "offsets-9",
        "offsets-10",
    ]
