"""Fencing the busiest node among 100,000 partitions (RF 3, 10 nodes): correct and O(affected).

A fencing is two steps: the request's own batch holds the new leaders; the ISRs the node
only followed in shrink once that batch is durable, in batches of their own."""

from __future__ import annotations

import gc
import time

from kafkacoord.codecs.models import (
    DecisionKey,
    NodeKey,
    PartitionKey,
    PartitionState,
    PartitionValue,
)
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request, RequestRef

from .support import Cluster, quiet_config, replayed

TOPICS = 10
PER_TOPIC = 10_000
SHRINK_BATCH = 8_000


def test_fencing_the_top_leader_of_100k_partitions() -> None:
    c = Cluster(quiet_config(fence_isr_shrink_batch=SHRINK_BATCH), seed=1)
    c.add_nodes(range(10))
    for t in range(TOPICS):
        c.create(f"t{t}", PER_TOPIC, 3)
    image = c.shard.image
    assert image.partition_count() == TOPICS * PER_TOPIC
    counts = image.leader_counts()
    top = max(counts, key=lambda n: (counts[n], -n))
    led = set(image.led_by(top))
    followed = set(image.in_isr_of(top)) - led
    before = {(v.topic, v.partition): v for v in image.iter_partitions()}

    request = Request(RequestRef("bench", 1), "FenceNode", api.FenceNode(node_id=top))
    gc.unfreeze()
    started = time.perf_counter()
    result = c.shard.handle(request, c.now)
    elapsed = time.perf_counter() - started
    # A batch this size is mostly new long-lived state: frozen out of the collector's sight.
    assert gc.get_freeze_count() > len(result.records)
    gc.unfreeze()
    for record in result.records:
        c.shard.replay(record)
        c.log.append(record)
    assert result.replies[0].error.name == "NONE"
    # The fencing's decision, then the node.
    assert [type(r.key) for r in result.records[:2]] == [DecisionKey, NodeKey]
    assert result.records[1].key == NodeKey(top)
    leaders = [r.value for r in result.records if isinstance(r.key, PartitionKey)]
    assert {(v.topic, v.partition) for v in leaders} == led  # new leaders first, alone

    # Durable: the shrinks start, each batch after the one before.
    assert not c.shard.fire_timers(c.now).records  # nothing before the append is durable
    assert result.committed() == result.replies
    shrinks = []
    while True:
        shrink = c.shard.fire_timers(c.now)
        if not shrink.records:
            break
        assert len(shrink.records) <= SHRINK_BATCH
        for record in shrink.records:
            c.shard.replay(record)
            c.log.append(record)
        assert not c.shard.fire_timers(c.now).records  # the next waits for this one
        shrink.committed()
        shrinks.append(shrink.records)
    assert len(shrinks) == -(-len(followed) // SHRINK_BATCH)
    followers = [r.value for batch in shrinks for r in batch]
    assert {(v.topic, v.partition) for v in followers} == followed
    partitions = leaders + followers
    assert len(partitions) == len(led) + len(followed)  # one record per affected partition
    for value in partitions:
        assert isinstance(value, PartitionValue)
        key = (value.topic, value.partition)
        old = before[key]
        assert top not in value.isr and value.replicas == old.replicas
        if key in led:
            assert value.leader != top and value.leader in value.isr
            assert value.state is PartitionState.ONLINE
            assert value.leader == next(r for r in old.replicas if r != top)
            assert value.leader_epoch == old.leader_epoch + 1
        else:
            assert value.leader == old.leader and value.leader_epoch == old.leader_epoch
        assert value.partition_epoch == old.partition_epoch + 1
    assert image.led_by(top) == set() and image.in_isr_of(top) == set()
    image.check_indexes()
    # Untouched partitions are the same objects: no per-partition work beyond the node's.
    untouched = set(before) - led - followed
    assert all(image.partition(*key) is before[key] for key in untouched)
    # Generous: the pure-Python handler takes ~0.2 s here; this catches O(N) regressions.
    assert elapsed < 3.0
    assert replayed(c.log).snapshot() == image.snapshot()
