"""Scrape-time collectors: daemon status, start-up recovery and poison counts."""

from __future__ import annotations

import importlib.util

from prometheus_client import CollectorRegistry, generate_latest

from kafkacoord.coordinator.runtime.host import HostState
from kafkacoord.server.ops.collectors import (
    POISON_MODULE,
    PoisonCollector,
    RecoveryCollector,
    StatusCollector,
    poison_counts_source,
)
from kafkacoord.server.ops.status import ControllerStatus, DaemonStatus, ListenerCounts
from kafkacoord.storage.cache import ShardId
from kafkacoord.storage.fold import FoldStats
from kafkacoord.storage.recovery import ShardLoad


def test_status_of_the_active_controller() -> None:
    status = DaemonStatus(
        node_id=1,
        started=True,
        controller=ControllerStatus(
            elected=True, active=True, epoch=7, activations=2,
            elections={"offline": 3, "preferred": 1},
        ),
        shards={"controller": HostState.ACTIVE, "offsets-0": HostState.ACTIVE,
                "offsets-1": HostState.LOADING},
        listener=ListenerCounts(
            connections=3, accepted=9, refused=1, requests=40,
            bad_frames={"oversize frame": 2}, rejected={"NOT_COORDINATOR": 5},
            requests_refused={("OffsetCommit", "out_of_range"): 4,
                              ("RegisterNode", "unauthorized"): 2},
            paused={"write buffer": 6, "memory": 1}, reading_paused=2, frames_timed_out=3,
            handshakes_timed_out=4, handshakes_failed=5, pushes_dropped=8,
            buffered_bytes=65536),
    )  # fmt: skip
    registry = CollectorRegistry()
    registry.register(StatusCollector(lambda: status))
    value = registry.get_sample_value
    assert value("kafkacoord_started") == 1
    assert value("kafkacoord_controller_active") == 1
    assert value("kafkacoord_controller_epoch") == 7
    assert value("kafkacoord_controller_activations_total") == 2
    assert value("kafkacoord_controller_standby_offset") is None  # the controller follows none
    assert value("kafkacoord_leader_elections_total", {"kind": "offline"}) == 3
    assert value("kafkacoord_leader_elections_total", {"kind": "preferred"}) == 1
    assert value("kafkacoord_shards", {"state": "ACTIVE"}) == 2
    assert value("kafkacoord_shards", {"state": "LOADING"}) == 1
    assert value("kafkacoord_shards", {"state": "STOPPED"}) == 0
    assert value("kafkacoord_listener_connections") == 3
    assert value("kafkacoord_connections_accepted_total") == 9
    assert value("kafkacoord_connections_refused_total") == 1
    assert value("kafkacoord_requests_received_total") == 40
    assert value("kafkacoord_bad_frames_total", {"reason": "oversize frame"}) == 2
    assert value("kafkacoord_request_rejects_total", {"error": "NOT_COORDINATOR"}) == 5
    refused = {"api": "OffsetCommit", "reason": "out_of_range"}
    assert value("kafkacoord_requests_refused_total", refused) == 4
    # Refusals for the principal, by api alone.
    assert value("kafkacoord_authorization_failures_total", {"api": "RegisterNode"}) == 2
    assert value("kafkacoord_authorization_failures_total", {"api": "OffsetCommit"}) is None
    assert value("kafkacoord_listener_pauses_total", {"reason": "write buffer"}) == 6
    assert value("kafkacoord_listener_pauses_total", {"reason": "memory"}) == 1
    assert value("kafkacoord_listener_paused_connections") == 2
    assert value("kafkacoord_frames_timed_out_total") == 3
    assert value("kafkacoord_tls_handshake_errors_total", {"kind": "timeout"}) == 4
    assert value("kafkacoord_tls_handshake_errors_total", {"kind": "failed"}) == 5
    assert value("kafkacoord_pushes_dropped_total") == 8
    assert value("kafkacoord_listener_buffered_bytes") == 65536


def test_a_standby_has_no_epoch_and_a_starting_daemon_no_controller() -> None:
    standby = DaemonStatus(
        node_id=2, started=True,
        controller=ControllerStatus(elected=False, active=False, epoch=None, activations=0,
                                    standby_offset=1234),
    )  # fmt: skip
    registry = CollectorRegistry()
    registry.register(StatusCollector(lambda: standby))
    assert registry.get_sample_value("kafkacoord_controller_active") == 0
    assert registry.get_sample_value("kafkacoord_controller_epoch") is None
    assert registry.get_sample_value("kafkacoord_controller_standby_offset") == 1234

    starting = CollectorRegistry()
    starting.register(StatusCollector(lambda: DaemonStatus(node_id=2, started=False)))
    assert starting.get_sample_value("kafkacoord_started") == 0
    assert starting.get_sample_value("kafkacoord_controller_activations_total") is None


def test_the_status_is_read_at_scrape_time() -> None:
    statuses = iter([DaemonStatus(node_id=0, started=False), DaemonStatus(node_id=0, started=True)])
    registry = CollectorRegistry()
    registry.register(StatusCollector(lambda: next(statuses)))  # describe() reads nothing
    assert b"kafkacoord_started 0.0" in generate_latest(registry)
    assert b"kafkacoord_started 1.0" in generate_latest(registry)


def test_recovery_per_partition() -> None:
    loads = {
        "__kc_offsets": {
            0: ShardLoad(ShardId("__kc_offsets", 0), 0, 900, seconds=1.5, stats=FoldStats(900)),
            1: ShardLoad(ShardId("__kc_offsets", 1), 0, 0, seconds=0.1),
        }
    }
    registry = CollectorRegistry()
    registry.register(RecoveryCollector(lambda: loads))
    labels = {"topic": "__kc_offsets", "partition": "0"}
    assert registry.get_sample_value("kafkacoord_recovery_seconds", labels) == 1.5
    assert registry.get_sample_value("kafkacoord_recovery_records", labels) == 900
    labels["partition"] = "1"
    assert registry.get_sample_value("kafkacoord_recovery_records", labels) == 0


def test_poison_counts_by_topic() -> None:
    counts = {"__kc_offsets": 3}
    registry = CollectorRegistry()
    registry.register(PoisonCollector(lambda: counts))
    labels = {"topic": "__kc_offsets"}
    assert registry.get_sample_value("kafkacoord_poison_records_skipped_total", labels) == 3
    counts["__kc_offsets"] = 4  # a later scrape sees the new count
    assert registry.get_sample_value("kafkacoord_poison_records_skipped_total", labels) == 4


def test_poison_source_follows_the_storage_module() -> None:
    source = poison_counts_source()
    if importlib.util.find_spec(POISON_MODULE) is None:
        assert source is None
    else:
        assert source is not None
        assert all(isinstance(n, int) for n in source().values())
