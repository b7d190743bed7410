"""A batch stamps every record put in it with its controller epoch, and refuses a record
that carries another."""

from __future__ import annotations

import dataclasses

import pytest

from kafkacoord.codecs.models import (
    ControllerValue,
    DecisionKey,
    DecisionValue,
    NodeValue,
    PartitionValue,
    RebalanceState,
    RebalanceValue,
    TopicValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.partition_change import new_partition
from kafkacoord.coordinator.controller.records import (
    EPOCH_FROM_BATCH,
    new_node_value,
    new_topic_value,
)
from kafkacoord.coordinator.controller.states import PartitionPhase

EPOCH = 7
TRIGGER = Trigger(TriggerKind.TOPIC_CREATED, principal="CN=ops", request_id="cli:1")


def fresh() -> tuple[NodeValue, TopicValue, PartitionValue, RebalanceValue]:
    node = new_node_value(1, "inc", 1, 0, rack=None, endpoints={}, roles=())
    topic = new_topic_value("t", "id", 1, 1, created_ms=0, configs={})
    partition = new_partition("t", 0, (1,), {1}, 0, decision=DecisionKey(EPOCH, 0))
    rebalance = RebalanceValue("p", RebalanceState.RUNNING, (), (), (), 1, 1, 1, 0, 0,
                               EPOCH_FROM_BATCH)  # fmt: skip
    return node, topic, partition, rebalance


def test_put_stamps_the_batch_epoch_on_every_value() -> None:
    batch = Batch(MetadataImage(), EPOCH, 10)
    node, topic, partition, rebalance = fresh()
    batch.put_controller(3, "c", None)
    batch.put_node(node)
    batch.put_topic(topic)
    assert batch.put_partition(partition, via=PartitionPhase.NEW)
    batch.put_rebalance(rebalance)
    existing = dataclasses.replace(partition, partition=1)  # a copy: not stamped yet
    batch.put_existing_partitions([existing])
    controller, *values = [r.value for r in batch.records]
    assert controller == ControllerValue(EPOCH, 3, "c", 10, None)
    assert [v.controller_epoch for v in values] == [EPOCH] * 5  # type: ignore[union-attr]
    # Putting a value of this batch again is no change of epoch.
    batch.put_node(node)
    assert node.controller_epoch == EPOCH


@pytest.mark.parametrize("method", ["node", "topic", "partition", "existing", "rebalance"])
def test_a_value_of_another_controller_epoch_is_refused(method: str) -> None:
    batch = Batch(MetadataImage(), EPOCH, 10)
    node, topic, partition, rebalance = fresh()
    stale = {
        "node": (batch.put_node, node),
        "topic": (batch.put_topic, topic),
        "partition": (lambda v: batch.put_partition(v, via=PartitionPhase.NEW), partition),
        "existing": (lambda v: batch.put_existing_partitions([v]), partition),
        "rebalance": (batch.put_rebalance, rebalance),
    }
    put, value = stale[method]
    older = dataclasses.replace(value, controller_epoch=EPOCH - 1)  # type: ignore[call-overload]
    refused = (
        r"carries controller epoch 6, but this batch writes epoch 7: "
        r"a record takes its epoch from the batch it is put in"
    )
    with pytest.raises(ValueError, match=refused):
        put(older)
    assert batch.records == []
    assert batch.partition("t", 0) is None and batch.node(1) is None


def test_a_batch_writes_with_a_controllers_epoch() -> None:
    with pytest.raises(ValueError, match="controller's epoch"):
        Batch(MetadataImage(), -1, 10)


def test_a_partition_value_without_a_cause_is_refused_and_a_node_takes_the_decision() -> None:
    batch = Batch(MetadataImage(), EPOCH, 10)
    node, _, partition, _ = fresh()
    uncaused = dataclasses.replace(partition, cause=None)
    with pytest.raises(ValueError, match="partition t-0 has no cause"):
        batch.put_partition(uncaused, via=PartitionPhase.NEW)
    with pytest.raises(ValueError, match="partition t-0 has no cause"):
        batch.put_existing_partitions([uncaused])
    assert batch.records == []
    with batch.because(TRIGGER):
        batch.put_node(node)
    assert node.decision == DecisionKey(EPOCH, 0)
    assert [r.value for r in batch.records[:1]] == [DecisionValue(TRIGGER, 10, EPOCH)]
