"""The Prometheus host observer: loads, appends and replies land in the daemon's registry."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.server.ops.observer import PrometheusObserver, shard_kind


def test_loads_appends_and_replies_are_recorded() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    observer.loaded("offsets-3", 0.25, 120)
    observer.loaded("offsets-3", 0.5, 130)
    observer.appended("offsets-3", 4, 0.004)
    observer.appended("offsets-7", 1, 0.2)
    observer.appended("controller", 2, 0.03)
    observer.answered("offsets-3", "OffsetCommit", ErrorCode.NONE)
    observer.answered("offsets-7", "OffsetCommit", ErrorCode.NONE)
    observer.answered("offsets-7", "JoinGroup", ErrorCode.UNKNOWN_MEMBER_ID)

    value = registry.get_sample_value
    assert value("kafkacoord_shard_load_seconds", {"shard": "offsets-3"}) == 0.5
    assert value("kafkacoord_shard_load_records", {"shard": "offsets-3"}) == 130
    assert value("kafkacoord_shard_loads_total", {"shard": "offsets-3"}) == 2
    assert value("kafkacoord_append_records_total", {"shard": "offsets-3"}) == 4
    assert value("kafkacoord_append_records_total", {"shard": "controller"}) == 2
    # The histogram is per kind of shard, not per partition.
    assert value("kafkacoord_append_seconds_count", {"kind": "offsets"}) == 2
    assert value("kafkacoord_append_seconds_bucket", {"kind": "offsets", "le": "0.005"}) == 1
    assert value("kafkacoord_append_seconds_count", {"kind": "controller"}) == 1
    assert value("kafkacoord_replies_total", {"api": "OffsetCommit", "error": "NONE"}) == 2
    assert (
        value("kafkacoord_replies_total", {"api": "JoinGroup", "error": "UNKNOWN_MEMBER_ID"}) == 1
    )


def test_each_registry_is_independent() -> None:
    """Two daemons in one process: same metric names, separate registries."""
    first, second = CollectorRegistry(), CollectorRegistry()
    PrometheusObserver(first).appended("offsets-0", 5, 0.01)
    PrometheusObserver(second).appended("offsets-0", 1, 0.01)
    assert first.get_sample_value("kafkacoord_append_records_total", {"shard": "offsets-0"}) == 5
    assert second.get_sample_value("kafkacoord_append_records_total", {"shard": "offsets-0"}) == 1


def test_shard_kind() -> None:
    assert shard_kind("offsets-12") == "offsets"
    assert shard_kind("controller") == "controller"


def test_counts_from_many_threads_are_summed_and_buckets_are_cumulative() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)

    def work() -> None:
        for _ in range(1000):
            observer.answered("offsets-1", "OffsetCommit", ErrorCode.NONE)
            observer.appended("offsets-1", 2, 0.003)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    observer.appended("offsets-1", 1, 0.0025)  # on a bucket's bound: in that bucket
    observer.appended("offsets-1", 1, 99.0)  # past the last bound: only in +Inf
    value = registry.get_sample_value
    assert value("kafkacoord_replies_total", {"api": "OffsetCommit", "error": "NONE"}) == 4000
    assert value("kafkacoord_append_records_total", {"shard": "offsets-1"}) == 8002
    offsets = {"kind": "offsets"}
    assert value("kafkacoord_append_seconds_bucket", {**offsets, "le": "0.001"}) == 0
    assert value("kafkacoord_append_seconds_bucket", {**offsets, "le": "0.0025"}) == 1
    assert value("kafkacoord_append_seconds_bucket", {**offsets, "le": "0.005"}) == 4001
    assert value("kafkacoord_append_seconds_bucket", {**offsets, "le": "10.0"}) == 4001
    assert value("kafkacoord_append_seconds_bucket", {**offsets, "le": "+Inf"}) == 4002
    assert value("kafkacoord_append_seconds_count", offsets) == 4002
    assert value("kafkacoord_append_seconds_sum", offsets) == pytest.approx(4000 * 0.003 + 99.0025)
