"""The controller-epoch fence (Kafka's StaleControllerEpoch rule) and its users."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.codecs import RecordType
from kafkacoord.codecs.fencing import NO_EPOCH, ControllerEpochFence, controller_epoch_of
from kafkacoord.codecs.models import (
    AvroModel,
    ControllerKey,
    ControllerValue,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime import loader
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.spark.source.fence import Fence
from kafkacoord.storage import fencing as storage
from kafkacoord.storage.fold import ChunkFolder, metadata_policy


def controller(epoch: int) -> ControllerValue:
    return ControllerValue(epoch, 1, "inc", 0)


def partition(epoch: int, p: int = 0) -> PartitionValue:
    return PartitionValue(
        "t", p, PartitionState.ONLINE, (1,), (1,), 1, 0, 0, 0, controller_epoch=epoch
    )


def topic(epoch: int) -> TopicValue:
    return TopicValue("t", "id", 1, 1, 0, epoch)


def node(epoch: int) -> NodeValue:
    return NodeValue(1, "inc", 1, False, 0, epoch)


def test_a_controller_record_raises_the_fence() -> None:
    fence = ControllerEpochFence()
    assert fence.epoch == NO_EPOCH
    assert fence.admit(partition(0))  # nothing seen yet: everything passes
    assert fence.admit(controller(3)) and fence.epoch == 3
    assert fence.admit(partition(3))
    assert fence.admit(partition(4))  # a newer stamp passes; only controllers move the fence
    assert fence.epoch == 3


def test_decisions_of_an_older_controller_are_fenced() -> None:
    fence = ControllerEpochFence(5)
    for stale in (partition(4), topic(4), node(0)):
        assert not fence.admit(stale), stale
    for current in (partition(5), topic(5), node(6)):
        assert fence.admit(current), current
    assert fence.epoch == 5


def test_an_older_controller_record_is_stale_and_leaves_the_fence() -> None:
    fence = ControllerEpochFence(5)
    assert not fence.admit(controller(4))
    assert fence.epoch == 5
    assert fence.admit(controller(5))  # the same controller again
    assert fence.admit(controller(6)) and fence.epoch == 6


def test_tombstones_and_unstamped_values_always_pass() -> None:
    fence = ControllerEpochFence(9)
    assert fence.admit(None)
    assert fence.admit_epoch(None)
    assert fence.epoch == 9


def test_admit_epoch_is_the_same_rule_on_bare_epochs() -> None:
    fence = ControllerEpochFence(2)
    assert not fence.admit_epoch(1)
    assert fence.admit_epoch(7) and fence.epoch == 2
    assert not fence.admit_epoch(1, announces=True) and fence.epoch == 2
    assert fence.admit_epoch(7, announces=True) and fence.epoch == 7


def test_controller_epoch_of() -> None:
    assert controller_epoch_of(controller(4)) == 4
    assert controller_epoch_of(partition(3)) == 3
    assert controller_epoch_of(topic(2)) == 2
    assert controller_epoch_of(node(1)) == 1
    assert controller_epoch_of(None) == NO_EPOCH


def test_every_reader_of_the_metadata_log_uses_this_fence() -> None:
    assert storage.ControllerEpochFence is ControllerEpochFence
    assert isinstance(MetadataImage().fence, ControllerEpochFence)
    folder = ChunkFolder("m", metadata_policy(), strict=False, controller_epoch=4)
    assert isinstance(folder.controller_fence, ControllerEpochFence)
    assert folder.controller_epoch == 4
    assert issubclass(Fence, ControllerEpochFence)
    assert loader.replay_order(Record(PartitionKey("t", 0), partition(7))) == 7
    assert loader.replay_order(Record(ControllerKey(), controller(8))) == 8
    assert loader.replay_order(Record(TopicKey("t"), None)) == NO_EPOCH


_KINDS = st.sampled_from(["controller", "partition", "topic", "node", "tombstone"])


def _record(kind: str, epoch: int) -> tuple[RecordType, AvroModel, AvroModel | None]:
    if kind == "controller":
        return RecordType.CONTROLLER, ControllerKey(), controller(epoch)
    if kind == "partition":
        return RecordType.PARTITION, PartitionKey("t", 0), partition(epoch)
    if kind == "topic":
        return RecordType.TOPIC, TopicKey("t"), topic(epoch)
    if kind == "node":
        return RecordType.NODE, NodeKey(1), node(epoch)
    return RecordType.PARTITION, PartitionKey("t", 0), None


@given(st.lists(st.tuples(_KINDS, st.integers(0, 5)), max_size=30))
def test_the_image_and_the_spark_columns_fence_like_the_fence(
    log: list[tuple[str, int]],
) -> None:
    fence, image, columns = ControllerEpochFence(), MetadataImage(), Fence()
    for kind, epoch in log:
        rtype, key, value = _record(kind, epoch)
        admitted = fence.admit(value)
        assert image.apply(key, value) is admitted
        if value is not None:  # the Spark source never fences a tombstone
            assert columns.admits(rtype, value.to_avro()) is admitted
    assert image.controller_epoch == columns.epoch == fence.epoch
