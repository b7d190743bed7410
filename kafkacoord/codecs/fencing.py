"""Leader-epoch fencing of a group shard's log: the pure rule, no I/O.

Every record a shard leader appends carries its leader epoch in a record header.
A new leader first appends a ``ShardLeader`` record with its epoch; from there on,
records tagged with a lower epoch are a zombie's (an old leader that has not yet
noticed it lost the shard) and every reader ignores them. This is Kafka's own
leader-epoch rule, applied by the readers of the log instead of by the broker.

It lives with the codecs so every reader applies the same rule: the daemon's
loader (:mod:`kafkacoord.storage.fencing`) and the Spark source
(:mod:`kafkacoord.spark.source`), which must not depend on the daemon's storage.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from .errors import CodecError
from .models import ShardLeaderValue
from .records import RecordType, decode_value

EPOCH_HEADER: Final = "kc.epoch"
_EPOCH = struct.Struct(">i")

Headers = Sequence[tuple[str, str | bytes | None]]


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
    "Headers",
    "LeaderEpochFence",
    "epoch_headers",
    "header_epoch",
    "marker_epoch",
]
