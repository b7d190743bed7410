"""Hand-written Avro for the partition record, the one a large cluster holds a million of.

Byte for byte what fastavro writes with the current schemas (``partition_key.v1``,
``partition_value.v2``); tests hold the two to each other on random values. Any
other schema version goes through fastavro.
"""

from __future__ import annotations

from typing import Final

from .avro_binary import (
    read_int,
    read_int_array,
    read_long,
    read_string,
    write_int,
    write_int_array,
    write_long,
    write_string,
)
from .models import PartitionKey, PartitionValue, Reassignment
from .models.metadata import PartitionState

KEY_VERSION: Final = 1
VALUE_VERSION: Final = 2

_STATES: Final = tuple(PartitionState)
_STATE_INDEX: Final = {state: write_long(i) for i, state in enumerate(_STATES)}
_NULL: Final = b"\x00"
_SOME: Final = b"\x02"  # union branch 1


def encode_key_body(key: PartitionKey) -> bytes:
    return write_string(key.topic) + write_int(key.partition)


def decode_key_body(buf: bytes, pos: int) -> tuple[PartitionKey, int]:
    topic, pos = read_string(buf, pos)
    partition, pos = read_int(buf, pos)
    return PartitionKey(topic, partition), pos


def _reassignment(r: Reassignment) -> bytes:
    return b"".join((
        _SOME,
        write_int_array(r.original_replicas),
        write_int_array(r.target_replicas),
        write_int_array(r.adding_replicas),
        write_int_array(r.removing_replicas),
        write_string(r.step),
        write_long(r.started_ms),
    ))  # fmt: skip


def encode_value_body(v: PartitionValue) -> bytes:
    # Field order is the schema's, not the dataclass's.
    return b"".join((
        write_string(v.topic),
        write_int(v.partition),
        _STATE_INDEX[v.state],
        write_int_array(v.replicas),
        write_int_array(v.isr),
        write_int(v.leader),
        write_int(v.leader_epoch),
        write_int(v.partition_epoch),
        _NULL if v.reassignment is None else _reassignment(v.reassignment),
        write_string(v.election),
        write_long(v.updated_ms),
        write_int(v.controller_epoch),
        write_int_array(v.elr),
        write_int_array(v.last_known_elr),
    ))  # fmt: skip


def _read_reassignment(buf: bytes, pos: int) -> tuple[Reassignment, int]:
    original, pos = read_int_array(buf, pos)
    target, pos = read_int_array(buf, pos)
    adding, pos = read_int_array(buf, pos)
    removing, pos = read_int_array(buf, pos)
    step, pos = read_string(buf, pos)
    started_ms, pos = read_long(buf, pos)
    return Reassignment(original, target, adding, removing, step, started_ms), pos


def decode_value_body(buf: bytes, pos: int) -> tuple[PartitionValue, int]:
    topic, pos = read_string(buf, pos)
    partition, pos = read_int(buf, pos)
    state_index, pos = read_int(buf, pos)
    if not 0 <= state_index < len(_STATES):
        raise ValueError(f"enum index {state_index} is not a PartitionState")
    replicas, pos = read_int_array(buf, pos)
    isr, pos = read_int_array(buf, pos)
    leader, pos = read_int(buf, pos)
    leader_epoch, pos = read_int(buf, pos)
    partition_epoch, pos = read_int(buf, pos)
    branch, pos = read_int(buf, pos)
    reassignment: Reassignment | None = None
    if branch == 1:
        reassignment, pos = _read_reassignment(buf, pos)
    elif branch != 0:
        raise ValueError(f"union branch {branch} of reassignment does not exist")
    election, pos = read_string(buf, pos)
    updated_ms, pos = read_long(buf, pos)
    controller_epoch, pos = read_int(buf, pos)
    elr, pos = read_int_array(buf, pos)
    last_known_elr, pos = read_int_array(buf, pos)
    value = PartitionValue(
        topic, partition, _STATES[state_index], replicas, isr, leader, leader_epoch,
        partition_epoch, updated_ms, controller_epoch, reassignment, election, elr,
        last_known_elr,
    )  # fmt: skip
    return value, pos
