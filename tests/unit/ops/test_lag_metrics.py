"""Lag metrics: sums, Burrow's status one-hot, the partition cap, only led groups."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from kafkacoord.console.lag import LagHistory, Status
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.server.lag_service import LagService
from kafkacoord.server.ops.lag_metrics import LagCollector, LagSnapshot, lag_snapshot
from kafkacoord.server.settings import load_settings


def _caught_up(history: LagHistory, group: str, topic: str, partitions: int) -> None:
    """A consumer at the log end of every partition, committing each second."""
    for t in range(10):
        offsets = {(topic, p): 100 * t for p in range(partitions)}
        history.record(group, t * 1000, offsets, offsets)


def _stopped(history: LagHistory, group: str) -> None:
    """Partition 0 lags 5, then more, while committing nothing: Burrow's STOP."""
    for t in range(10):
        ends = {("orders", 0): 10 + t, ("orders", 1): 20}
        history.record(group, t * 1000, {("orders", 0): 5, ("orders", 1): 18}, ends)


def _falling_behind(history: LagHistory, group: str) -> None:
    """Commits each second, the lag growing by one each time: Burrow's WARN."""
    for t in range(10):
        history.record(group, t * 1000, {("orders", 0): t}, {("orders", 0): 10 + 2 * t})


def _registry(snapshot: LagSnapshot) -> CollectorRegistry:
    collector = LagCollector()
    collector.update(snapshot)
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def test_group_lag_is_the_sum_and_max_over_its_partitions_with_burrows_status() -> None:
    history = LagHistory()
    _stopped(history, "late")
    _caught_up(history, "fine", "events", 2)
    _falling_behind(history, "slow")
    registry = _registry(lag_snapshot(history, ["late", "fine", "slow"], 100))
    value = registry.get_sample_value
    # late: partition 0 at end 19, committed 5 -> 14; partition 1 at 20, committed 18.
    assert value("kafkacoord_group_lag", {"group": "late"}) == 16
    assert value("kafkacoord_group_lag_max", {"group": "late"}) == 14
    assert value("kafkacoord_group_lag", {"group": "fine"}) == 0
    assert value("kafkacoord_group_lag", {"group": "slow"}) == 19
    expected = {"late": Status.ERR, "fine": Status.OK, "slow": Status.WARN}
    for group, current in expected.items():
        for status in (Status.OK, Status.WARN, Status.ERR):
            labels = {"group": group, "status": status.value}
            assert value("kafkacoord_group_status", labels) == (1 if status is current else 0)
    assert value("kafkacoord_partition_lag",
                 {"group": "late", "topic": "orders", "partition": "0"}) == 14  # fmt: skip
    assert value("kafkacoord_partition_lag",
                 {"group": "late", "topic": "orders", "partition": "1"}) == 2  # fmt: skip
    assert value("kafkacoord_partition_lag_dropped") == 0


def test_partition_series_stop_at_the_cap_and_the_rest_are_counted() -> None:
    history = LagHistory()
    _caught_up(history, "a", "events", 3)
    _caught_up(history, "b", "events", 3)
    snapshot = lag_snapshot(history, ["a", "b"], 4)
    assert [(g, p) for g, _, p, _ in snapshot.partitions] == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0)]  # fmt: skip
    assert snapshot.dropped == 2
    registry = _registry(snapshot)
    # The group series cover every partition, capped or not.
    assert [g.group for g in snapshot.groups] == ["a", "b"]
    assert registry.get_sample_value("kafkacoord_partition_lag_dropped") == 2
    assert registry.get_sample_value(
        "kafkacoord_partition_lag", {"group": "b", "topic": "events", "partition": "1"}
    ) is None  # fmt: skip
    assert lag_snapshot(history, ["a", "b"], 0).partitions == []


def test_groups_without_samples_have_no_series() -> None:
    history = LagHistory()
    history.record("empty", 0, {}, {})
    snapshot = lag_snapshot(history, ["empty", "unknown"], 10)
    assert snapshot == LagSnapshot()
    registry = _registry(snapshot)
    assert registry.get_sample_value("kafkacoord_group_lag", {"group": "empty"}) is None


def test_a_daemon_exports_only_the_groups_whose_shard_it_leads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    settings = load_settings(offsets_partitions=8)
    groups = [f"group-{i}" for i in range(20)]
    led = {partition_for(groups[0], 8), partition_for(groups[1], 8)}
    mine = [g for g in groups if partition_for(g, 8) in led]
    assert 2 <= len(mine) < len(groups)
    history = LagHistory()
    for group in groups:
        _caught_up(history, group, "events", 1)
    collector = LagCollector()
    service = LagService(settings, collector, lambda shard: shard in led)
    service._publish(history)
    registry = CollectorRegistry()
    registry.register(collector)
    exported = {
        s.labels["group"]
        for metric in registry.collect()
        if metric.name == "kafkacoord_group_lag"
        for s in metric.samples
    }
    assert exported == set(mine)
    service.close()  # not sampling any more: no series
    assert all(
        m.samples == [] for m in collector.collect() if m.name != "kafkacoord_partition_lag_dropped"
    )
