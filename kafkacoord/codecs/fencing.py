"""Epoch fencing of the internal topics: the pure rules, no I/O.

Two fences, one per topic family, and the rule of one partition's epochs:

- :class:`ControllerEpochFence` (``__kc_metadata``): Kafka's StaleControllerEpoch
  rule. A ``ControllerRecord`` raises the fence to its epoch; a decision stamped with a
  lower ``controller_epoch`` is a deposed controller's late write.
- :class:`LeaderEpochFence` (``__kc_offsets``), below.
- :func:`partition_epoch_order`: where a partition's leader and partition epochs stand
  against the ones held. The controller refuses an ``AlterPartition`` by it, and a node
  agent takes a partition record by it (Kafka's ``becomeLeaderOrFollower``).

Every record a shard leader appends carries its leader epoch in a record header.
A new leader first appends a ``ShardLeader`` record with its epoch; from there on,
records tagged with a lower epoch are a zombie's (an old leader that has not yet
noticed it lost the shard) and every reader ignores them. This is Kafka's own
leader-epoch rule, applied by the readers of the log instead of by the broker.

Both live with the codecs so every reader applies the same rules: the controller's
image, the daemon's loader (:mod:`kafkacoord.storage.fencing`) and the Spark source
(:mod:`kafkacoord.spark.source`), which must not depend on the daemon's storage.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import Enum
from typing import Final

from .errors import CodecError
from .models import AvroModel, ControllerValue, ShardLeaderValue
from .records import RecordType, decode_value

EPOCH_HEADER: Final = "kc.epoch"
_EPOCH = struct.Struct(">i")

Headers = Sequence[tuple[str, str | bytes | None]]

NO_EPOCH: Final = -1


def controller_epoch_of(value: AvroModel | None) -> int:
    """The controller epoch a metadata value carries: a ``ControllerRecord``'s own epoch,
    a decision's ``controller_epoch``; :data:`NO_EPOCH` for a tombstone."""
    if isinstance(value, ControllerValue):
        return value.epoch
    return int(getattr(value, "controller_epoch", NO_EPOCH))


class ControllerEpochFence:
    """Admits metadata records in log order; the fence rises with each newer controller.

    Tombstones carry no epoch and always pass. A ``ControllerRecord`` of an older epoch is
    itself stale and leaves the fence where it is.
    """

    __slots__ = ("epoch",)

    def __init__(self, epoch: int = NO_EPOCH) -> None:
        self.epoch = epoch

    def admit(self, value: AvroModel | None) -> bool:
        # On every replayed record (a failover writes tens of thousands): one getattr.
        if isinstance(value, ControllerValue):
            return self.admit_epoch(value.epoch, announces=True)
        stamped = getattr(value, "controller_epoch", None)
        return stamped is None or stamped >= self.epoch

    def admit_epoch(self, epoch: int | None, *, announces: bool = False) -> bool:
        """The rule on a bare epoch (``None``: unstamped); ``announces`` for a
        ``ControllerRecord``, which moves the fence."""
        if epoch is None:
            return True
        if epoch < self.epoch:
            return False
        if announces:
            self.epoch = epoch
        return True


class EpochOrder(Enum):
    """Where one partition state's epochs stand against another's."""

    OLDER_LEADER_EPOCH = "older leader epoch"
    NEWER_LEADER_EPOCH = "newer leader epoch"
    OLDER_PARTITION_EPOCH = "same leader epoch, older partition epoch"
    NEWER_PARTITION_EPOCH = "same leader epoch, newer partition epoch"
    SAME = "same epochs"

    @property
    def leader_epoch_differs(self) -> bool:
        return self in (EpochOrder.OLDER_LEADER_EPOCH, EpochOrder.NEWER_LEADER_EPOCH)


def partition_epoch_order(
    leader_epoch: int, partition_epoch: int, held_leader_epoch: int, held_partition_epoch: int
) -> EpochOrder:
    """Kafka's partition fencing: the leader epoch decides (a new one means a new leader,
    or a reassignment under way); within one leader epoch, the partition epoch (the ISR or
    the replicas changed). The controller bumps the partition epoch whenever it bumps the
    leader epoch, so the two never disagree."""
    if leader_epoch != held_leader_epoch:
        if leader_epoch < held_leader_epoch:
            return EpochOrder.OLDER_LEADER_EPOCH
        return EpochOrder.NEWER_LEADER_EPOCH
    if partition_epoch < held_partition_epoch:
        return EpochOrder.OLDER_PARTITION_EPOCH
    if partition_epoch > held_partition_epoch:
        return EpochOrder.NEWER_PARTITION_EPOCH
    return EpochOrder.SAME


def epoch_headers(epoch: int) -> list[tuple[str, str | bytes | None]]:
    return [(EPOCH_HEADER, _EPOCH.pack(epoch))]


def header_epoch(headers: Headers | None) -> int | None:
    """The writer's leader epoch, or ``None`` for an untagged record."""
    for name, value in headers or ():
        if name == EPOCH_HEADER and isinstance(value, bytes) and len(value) == _EPOCH.size:
            epoch: int = _EPOCH.unpack(value)[0]
            return epoch
    return None


def marker_epoch(key: bytes | None, value: bytes | None) -> int | None:
    """The epoch a ``ShardLeader`` record announces; ``None`` for any other record."""
    if not key or key[0] != RecordType.SHARD_LEADER or value is None:
        return None
    try:
        decoded = decode_value(RecordType.SHARD_LEADER, value)
    except CodecError:
        return None
    assert isinstance(decoded, ShardLeaderValue)
    return decoded.leader_epoch


class LeaderEpochFence:
    """Admits records in log order; the fence rises with each newer ``ShardLeader``.

    The header is checked before anything is decoded, so a zombie's tombstones
    and undecodable records are fenced like its other records.
    """

    def __init__(self, epoch: int = -1) -> None:
        self.epoch = epoch

    def admit(self, key: bytes | None, value: bytes | None, headers: Headers | None) -> bool:
        tagged = header_epoch(headers)
        if tagged is not None and tagged < self.epoch:
            return False
        announced = marker_epoch(key, value)
        if announced is not None:
            if announced < self.epoch:
                return False
            self.epoch = announced
        return True


__all__ = [
    "EPOCH_HEADER",
    "NO_EPOCH",
    "ControllerEpochFence",
    "EpochOrder",
    "Headers",
    "LeaderEpochFence",
    "controller_epoch_of",
    "epoch_headers",
    "header_epoch",
    "marker_epoch",
    "partition_epoch_order",
]
