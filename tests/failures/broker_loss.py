"""The broker loses everything (a ``memory://`` broker restarts): daemons must start over.

Two daemons serve a group with committed offsets and a created topic; then the
broker restarts. Every daemon must notice the new topic identity, log the
rebuild, serve again, and answer only from the new, empty log: no offsets of
the old group, no old topic, and a controller epoch counted again from 1.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.models import ControllerValue
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.storage.topics import InternalTopics
from tests.integration.cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

from .broker import BrokerControl
from .harness import read_log, report

SHARDS = 2
DAEMONS = (300, 301)
REBUILD_EVENT = "broker identity changed; rebuilding"
REBUILT_EVENT = "daemon rebuilt"

Offsets = dict[tuple[str, int], int]


@dataclass
class BrokerLossFigures:
    rebuild_events: dict[int, int] = field(default_factory=dict)
    """``broker identity changed; rebuilding`` lines per daemon."""
    rebuilt_events: dict[int, int] = field(default_factory=dict)
    committed_before: Offsets = field(default_factory=dict)
    old_group_after: Offsets = field(default_factory=dict)
    """What OffsetFetch returns for the pre-loss group after the loss (must be nothing)."""
    round_trips_after: dict[str, Offsets] = field(default_factory=dict)
    """Per group (one per shard): a commit after the loss, fetched back."""
    topic_before: bool = False
    topic_after: bool = False
    epochs_before: list[int] = field(default_factory=list)
    epochs_after: list[int] = field(default_factory=list)
    """Controller epochs in the metadata log, in log order, before and after the loss."""
    live_nodes_after: list[int] = field(default_factory=list)
    seconds_to_serve: float = 0.0
    """From the broker's restart until every daemon has rebuilt and answered."""


@dataclass(frozen=True)
class BrokerLossSummary:
    daemons_rebuilt: int
    seconds_to_serve: float


def _controller_epochs(bootstrap: str, topic: str) -> list[int]:
    """Controller records of the metadata log, read independently of kafkacoord."""
    epochs: list[int] = []
    for _, key, raw in read_log(bootstrap, topic, 0):
        try:
            _, value = decode_record(key, raw)
        except CodecError:
            continue
        if isinstance(value, ControllerValue):
            epochs.append(value.epoch)
    return epochs


def _group_on_shard(stem: str, shard: int) -> str:
    return next(f"{stem}{i}" for i in range(1000) if partition_for(f"{stem}{i}", SHARDS) == shard)


def _offsets(groups: GroupAdmin, group: str) -> Offsets:
    return {tp: p.offset for tp, p in groups.committed(group).items()}


def run_broker_loss_scenario(broker: BrokerControl, root: Path) -> BrokerLossFigures:
    bootstrap = broker.bootstrap
    prefix = f"b{uuid.uuid4().hex[:8]}_"
    topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
    env = {**fast_daemon_env(bootstrap, prefix, SHARDS), "KAFKACOORD_METRICS_PORT": "0",
           "KAFKACOORD_BROKER_CHECK_INTERVAL_MS": "500", "PYTHONFAULTHANDLER": "1"}  # fmt: skip
    figures = BrokerLossFigures()
    daemons: dict[int, DaemonProcess] = {}
    try:
        for node in DAEMONS:
            daemons[node] = start_daemon(env, root, node)
        for daemon in daemons.values():
            daemon.wait_for("node registered")

        old_group = "before-loss"
        with (
            GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS,
                       timeout_s=60) as groups,
            ControllerAdmin(bootstrap, topics, timeout_s=60) as admin,
        ):  # fmt: skip
            groups.reset_offsets(old_group, {("t", 0): 5, ("t", 1): 6})
            figures.committed_before = _offsets(groups, old_group)
            admin.create_topic("orders", replica_assignment={0: [DAEMONS[0]]})
            figures.topic_before = admin.metadata().topic("orders") is not None
        figures.epochs_before = _controller_epochs(bootstrap, topics.metadata)

        restarted = time.monotonic()
        broker.restart()
        for daemon in daemons.values():
            daemon.wait_for(REBUILT_EVENT, timeout_s=120)

        with GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS,
                        timeout_s=60) as groups:  # fmt: skip
            for shard in range(SHARDS):
                group = _group_on_shard("after-loss-", shard)
                groups.reset_offsets(group, {("t", shard): 100 + shard})
                figures.round_trips_after[group] = _offsets(groups, group)
            figures.old_group_after = _offsets(groups, old_group)
        figures.seconds_to_serve = time.monotonic() - restarted

        def all_live() -> list[int] | None:
            live = sorted(read_metadata(bootstrap, topics.metadata).live_nodes())
            return live if set(DAEMONS) <= set(live) else None

        figures.live_nodes_after = wait_until(all_live, timeout_s=60, what="both daemons live")
        figures.topic_after = read_metadata(bootstrap, topics.metadata).topic("orders") is not None
        figures.epochs_after = _controller_epochs(bootstrap, topics.metadata)
        for node, daemon in daemons.items():
            figures.rebuild_events[node] = sum(
                1 for e in list(daemon.events) if e.get("event") == REBUILD_EVENT
            )
            figures.rebuilt_events[node] = sum(
                1 for e in list(daemon.events) if e.get("event") == REBUILT_EVENT
            )
    finally:
        for node, daemon in daemons.items():
            daemon.stop()
            # Kept beside the data directories, for whoever has to read a failure.
            lines = [json.dumps(e) for e in list(daemon.events)]
            lines.append(json.dumps({"event": "exit", "code": daemon.process.returncode}))
            (root / f"d{node}.events.jsonl").write_text("\n".join(lines))
    rebuilt = sum(figures.rebuilt_events.values())
    report("broker_loss", broker, BrokerLossSummary(rebuilt, round(figures.seconds_to_serve, 1)))
    return figures


def check_broker_loss_outcome(figures: BrokerLossFigures) -> None:
    """The exact outcome, checked the same way on every broker."""

    # Before the loss: real state to lose.
    assert figures.committed_before == {("t", 0): 5, ("t", 1): 6}
    assert figures.topic_before
    assert figures.epochs_before and figures.epochs_before[0] == 0

    # Every daemon noticed and rebuilt, once.
    assert figures.rebuild_events == {node: 1 for node in DAEMONS}
    assert figures.rebuilt_events == {node: 1 for node in DAEMONS}

    # Serving again, from the new log only.
    assert sorted(figures.round_trips_after.values(), key=str) == [
        {("t", shard): 100 + shard} for shard in range(SHARDS)
    ]
    assert figures.old_group_after == {}
    assert not figures.topic_after
    assert set(DAEMONS) <= set(figures.live_nodes_after)
    # The controller counted its epoch again from the empty log, not on from the old one.
    assert figures.epochs_after and figures.epochs_after[0] == 0
