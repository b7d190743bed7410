"""Leader elections are counted by kind once a live controller's records are durable."""

from __future__ import annotations

from collections import Counter

from kafkacoord.coordinator.controller.shard import ControllerShard
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef, replay_result
from tests.unit.controller.support import Cluster


def test_live_elections_are_counted_by_kind() -> None:
    c = Cluster()
    c.add_nodes([1, 2, 3])
    c.create("orders", assignment={0: [1, 2], 1: [2, 3], 2: [1, 3]})
    assert c.shard.elections == Counter(initial=3)

    # Node 1 leads partitions 0 and 2: fencing it elects new leaders for both.
    c.ok(api.FenceNode(node_id=1))
    assert c.shard.elections == Counter(initial=3, offline=2)

    # Back in the ISR, node 1 is the preferred leader of 0 and 2 again.
    c.register(1, incarnation="inc-1-again")
    for partition in (0, 2):
        c.caught_up(1, "orders", partition)
    c.ok(api.ElectLeaders(election_type="preferred", partitions=None))
    assert c.shard.elections["preferred"] == 2

    c.ok(api.ControlledShutdown(node_id=2, node_epoch=c.node_epochs[2]))
    assert c.shard.elections["controlled_shutdown"] == 1  # partition 1 moves to node 3


def test_a_load_replays_history_without_counting_it() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("orders", partitions=4, replication_factor=2)
    assert sum(c.shard.elections.values()) == 4
    successor = c.failover()
    assert successor.shard.elections == Counter()


def test_a_shared_counter_outlives_the_shard() -> None:
    shared: Counter[str] = Counter()
    c = Cluster()
    c.shard = ControllerShard(c.config, 1000, "controller-1000", elections=shared)
    c.last = c._apply(c.shard.on_loaded(c.now))
    c.add_nodes([1])
    c.create("orders", partitions=2)
    reloaded = ControllerShard(c.config, 1000, "controller-1000", elections=shared)
    for record in c.log:
        reloaded.replay(record)
    assert shared == Counter(initial=2)
    assert reloaded.elections is shared


def test_an_election_counts_once_its_records_are_durable() -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("orders", assignment={0: [1, 2]})
    before = Counter(c.shard.elections)
    request = Request(RequestRef("test", 99), "FenceNode", api.FenceNode(node_id=1))
    result = replay_result(c.shard, c.shard.handle(request, c.now))
    assert any(getattr(r.value, "leader", None) == 2 for r in result.records)
    # Replayed (later requests see it) but not yet acknowledged: not counted.
    assert c.shard.elections == before
    result.committed()
    assert c.shard.elections == before + Counter(offline=1)
