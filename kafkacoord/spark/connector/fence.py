"""The epoch fences as a stateful stage of the connector pipeline (one state per partition).

Fencing depends on log order across keys: the controller epoch in force at a
metadata record is the newest epoch of the controller records before it, and a
group shard's leader epoch rises with each admitted ``ShardLeader`` marker
(:mod:`kafkacoord.spark.source.fence`, :mod:`kafkacoord.codecs.fencing`).
Spark SQL has no running state across a stream's rows, so this stage keeps the
epoch of each (topic, partition) in Spark's state store and walks each
micro-batch's rows in offset order.

Only the rows that can move an epoch (controller records, ``ShardLeader``
markers: a handful) go through the very same ``Fence`` and ``LeaderEpochFence``
the Python source uses; every other row is compared with the epoch in force at
its offset, vectorised. The stage passes every row through, adding:

- ``fence_epoch``: the epoch in force before the row (controller epoch on
  metadata topics, shard leader epoch on offsets topics, -1 elsewhere);
- ``admitted``: the leader fence admits the row (always true off offsets topics).

Whether a metadata record is fenced needs its decoded value; the decode step
decides that from ``fence_epoch``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

import numpy as np
import pandas as pd  # type: ignore[import-untyped]

from kafkacoord.codecs import CodecError, RecordType, decode_record
from kafkacoord.codecs.fencing import EPOCH_HEADER, LeaderEpochFence
from kafkacoord.codecs.models import ControllerValue

from ..source.fence import Fence
from ..source.options import Role

# Rows in: the Kafka coordinates, the raw record, its record type tag (the key's first
# byte, null without one) and its epoch header (null if untagged).
STAGE_INPUT: Final = ("topic", "partition", "offset", "timestamp", "key", "value", "kind", "tag")
STAGE_OUTPUT: Final = (
    "topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
    "kind int, tag int, fence_epoch int, admitted boolean"
)
STAGE_STATE: Final = "epoch int"
_TAG = struct.Struct(">i")


def fence_stage(
    group: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any
) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` function over the rows of one (topic, partition)."""
    topic = str(group[0])
    frames = [f for f in batches if len(f)]
    if not frames:
        return
    rows = pd.concat(frames, ignore_index=True).sort_values("offset", ignore_index=True)
    epoch = int(state.get[0]) if state.exists else -1
    role = Role.of(topic)
    if role is Role.METADATA:
        epochs, admitted, epoch = _controller(rows, epoch)
    elif role is Role.OFFSETS:
        epochs, admitted, epoch = _leader(rows, epoch)
    else:
        epochs, admitted = np.full(len(rows), -1, np.int32), np.ones(len(rows), bool)
    state.update((epoch,))
    yield rows.assign(fence_epoch=epochs, admitted=admitted)


def _movers(rows: pd.DataFrame, rtype: RecordType) -> np.ndarray:
    """Positions of the rows that may move the epoch: ``rtype`` records with a value."""
    kind = rows["kind"].to_numpy(dtype="float64", na_value=np.nan)
    return np.flatnonzero((kind == int(rtype)) & rows["value"].notna().to_numpy())


def _controller(rows: pd.DataFrame, epoch: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The controller epoch in force at each row, as the Python source's ``Fence``."""
    fence = Fence(epoch)
    epochs = np.empty(len(rows), np.int32)
    start = 0
    keys, values = rows["key"].to_numpy(), rows["value"].to_numpy()
    for at in _movers(rows, RecordType.CONTROLLER):
        epochs[start : at + 1] = fence.epoch
        start = at + 1
        try:
            _, decoded = decode_record(keys[at], values[at])
        except CodecError:
            continue  # poison moves nothing
        if isinstance(decoded, ControllerValue):
            fence.admits(RecordType.CONTROLLER, {"epoch": decoded.epoch})
    epochs[start:] = fence.epoch
    return epochs, np.ones(len(rows), bool), fence.epoch


def _leader(rows: pd.DataFrame, epoch: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The shard leader epoch at each row and the leader fence's verdict, as the loader."""
    fence = LeaderEpochFence(epoch)
    epochs = np.empty(len(rows), np.int32)
    markers = np.zeros(len(rows), bool)
    verdicts = np.ones(len(rows), bool)
    start = 0
    keys, values, tags = rows["key"].to_numpy(), rows["value"].to_numpy(), rows["tag"].to_numpy()
    for at in _movers(rows, RecordType.SHARD_LEADER):
        epochs[start : at + 1] = fence.epoch
        start = at + 1
        markers[at] = True
        tag = tags[at]
        headers = None if pd.isna(tag) else [(EPOCH_HEADER, _TAG.pack(int(tag)))]
        verdicts[at] = fence.admit(keys[at], values[at], headers)
    epochs[start:] = fence.epoch
    tagged = rows["tag"].to_numpy(dtype="float64", na_value=np.nan)
    # Any other record: a tag older than the epoch in force is a deposed leader's.
    admitted = np.where(markers, verdicts, np.isnan(tagged) | (tagged >= epochs))
    return epochs, admitted, fence.epoch
