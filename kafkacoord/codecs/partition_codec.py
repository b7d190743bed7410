"""Hand-written Avro for the partition record, the one a large cluster holds a million of.

Byte for byte what fastavro writes with the current schemas (``partition_key.v1``,
``partition_value.v3``); tests hold the two to each other on random values. It also
reads ``partition_value.v2``, the same fields without the trailing ``cause``, so a log
written before v3 loads as fast. Any other schema version goes through fastavro.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .avro_binary import (
    ONE_BYTE,
    read_int,
    read_int_array,
    read_long,
    read_string,
    write_int,
    write_int_array,
    write_long,
    write_string,
)
from .models import Cause, DecisionKey, PartitionKey, PartitionValue, Reassignment
from .models.base import slot_setters
from .models.metadata import PartitionState

KEY_VERSION: Final = 1
VALUE_VERSION: Final = 3
PREVIOUS_VALUE_VERSION: Final = 2  # v3 without the cause: read here too

_STATES: Final = tuple(PartitionState)
_STATE_INDEX: Final = {state: write_long(i) for i, state in enumerate(_STATES)}
_NULL: Final = b"\x00"
_SOME: Final = b"\x02"  # union branch 1


def encode_key_body(key: PartitionKey) -> bytes:
    return write_string(key.topic) + write_int(key.partition)


def decode_key_body(buf: bytes, pos: int) -> tuple[PartitionKey, int]:
    topic, pos = _read_name(buf, pos)
    b = buf[pos]
    if b < 0x80:
        partition, pos = ONE_BYTE[b], pos + 1
    else:
        partition, pos = read_int(buf, pos)
    key = _new(PartitionKey)
    _set_key_topic(key, topic)
    _set_key_partition(key, partition)
    return key, pos


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


def _cause(c: Cause) -> bytes:
    d = c.decision
    return b"".join((_SOME, write_int(d.controller_epoch), write_long(d.sequence),
                     write_string(c.rule)))  # fmt: skip


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
        _NULL if v.cause is None else _cause(v.cause),
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
    value, end, _ = _decode_value(buf, pos)
    return value, end


def decode_previous_value_body(buf: bytes, pos: int) -> tuple[PartitionValue, int]:
    """A ``partition_value.v2`` body: no cause."""
    value, end, _ = _decode_value(buf, pos, with_cause=False)
    return value, end


def decode_pair(
    key: bytes, *, with_cause: bool = True
) -> Callable[[bytes, int], tuple[tuple[PartitionKey, PartitionValue] | None, int]]:
    """A decoder of ``key``'s value body that also yields the key, built from the value:
    the key's body is the value's first two fields, byte for byte. ``None`` (with the
    body's end) when they differ. ``with_cause=False`` reads a v2 body."""

    def decode(value: bytes, pos: int) -> tuple[tuple[PartitionKey, PartitionValue] | None, int]:
        decoded, end, key_end = _decode_value(value, pos, with_cause)
        if value[pos:key_end] != key[2:]:
            return None, end
        pair_key = _new(PartitionKey)
        _set_key_topic(pair_key, decoded.topic)
        _set_key_partition(pair_key, decoded.partition)
        return (pair_key, decoded), end

    return decode


def _decode_value(buf: bytes, pos: int, with_cause: bool = True) -> tuple[PartitionValue, int, int]:
    """The value, where it ends, and where its partition field ends."""
    # A cold start decodes a million of these: one-byte ints are read inline, topics,
    # elections and replica lists are shared, and the frozen dataclass is filled slot by
    # slot (its __init__ costs twice as much). Longer ones go through the general readers.
    topic, pos = _read_name(buf, pos)
    b = buf[pos]
    if b < 0x80:
        partition, pos = ONE_BYTE[b], pos + 1
    else:
        partition, pos = read_int(buf, pos)
    key_end = pos
    state_index, pos = read_int(buf, pos)
    if not 0 <= state_index < len(_STATES):
        raise ValueError(f"enum index {state_index} is not a PartitionState")
    state = _STATES[state_index]
    replicas, pos = _read_ids(buf, pos)
    isr, pos = _read_ids(buf, pos)
    b = buf[pos]
    if b < 0x80:
        leader, pos = ONE_BYTE[b], pos + 1
    else:
        leader, pos = read_int(buf, pos)
    b = buf[pos]
    if b < 0x80:
        leader_epoch, pos = ONE_BYTE[b], pos + 1
    else:
        leader_epoch, pos = read_int(buf, pos)
    b = buf[pos]
    if b < 0x80:
        partition_epoch, pos = ONE_BYTE[b], pos + 1
    else:
        partition_epoch, pos = read_int(buf, pos)
    reassignment: Reassignment | None = None
    if buf[pos] == 0:  # union branch 0: null
        pos += 1
    else:
        branch, pos = read_int(buf, pos)
        if branch != 1:
            raise ValueError(f"union branch {branch} of reassignment does not exist")
        reassignment, pos = _read_reassignment(buf, pos)
    if buf[pos] == 0:
        election, pos = "", pos + 1
    else:
        election, pos = _read_name(buf, pos)
    updated_ms, pos = _read_time(buf, pos)
    b = buf[pos]
    if b < 0x80:
        controller_epoch, pos = ONE_BYTE[b], pos + 1
    else:
        controller_epoch, pos = read_int(buf, pos)
    # Both are empty but for partitions whose ISR fell below min.insync.replicas.
    if buf[pos] == 0:
        elr: tuple[int, ...] = ()
        pos += 1
    else:
        elr, pos = _read_ids(buf, pos)
    if buf[pos] == 0:
        last_known_elr: tuple[int, ...] = ()
        pos += 1
    else:
        last_known_elr, pos = _read_ids(buf, pos)
    cause: Cause | None = None
    if with_cause:
        if buf[pos] == 0:
            pos += 1
        else:
            branch, pos = read_int(buf, pos)
            if branch != 1:
                raise ValueError(f"union branch {branch} of cause does not exist")
            cause, pos = _read_cause(buf, pos)
    value = _new(PartitionValue)
    _set_topic(value, topic)
    _set_partition(value, partition)
    _set_state(value, state)
    _set_replicas(value, replicas)
    _set_isr(value, isr)
    _set_leader(value, leader)
    _set_leader_epoch(value, leader_epoch)
    _set_partition_epoch(value, partition_epoch)
    _set_updated_ms(value, updated_ms)
    _set_controller_epoch(value, controller_epoch)
    _set_reassignment(value, reassignment)
    _set_election(value, election)
    _set_elr(value, elr)
    _set_last_known_elr(value, last_known_elr)
    _set_cause(value, cause)
    return value, pos, key_end


def _read_cause(buf: bytes, pos: int) -> tuple[Cause, int]:
    # The records of one decision share their cause (a fencing's few rules): the object
    # is found by its bytes and shared.
    start = pos
    epoch, pos = read_int(buf, pos)
    sequence, pos = read_long(buf, pos)
    if buf[pos] == 0:
        rule, pos = "", pos + 1
    else:
        rule, pos = _read_name(buf, pos)
    raw = buf[start:pos]
    cause = _CAUSES.get(raw)
    if cause is None:
        if len(_CAUSES) >= _INTERN_LIMIT:
            _CAUSES.clear()
        cause = _CAUSES[raw] = Cause(DecisionKey(epoch, sequence), rule)
    return cause, pos


_CAUSES: dict[bytes, Cause] = {}


# -- shared topics and replica lists --------------------------------------------------------

# A million partitions name a few thousand topics and replica lists (and a few election
# kinds): each read of one is a dict hit on its bytes, and partitions share the objects.
_INTERN_LIMIT: Final = 1 << 16
_NAMES: dict[bytes, str] = {}
_IDS: dict[bytes, tuple[int, ...]] = {}


def _read_time(buf: bytes, pos: int) -> tuple[int, int]:
    """A long; a timestamp equal to the last one read (a batch of changes shares one)
    costs a slice and a compare."""
    raw, value = _last_time[0]
    if buf[pos : pos + len(raw)] == raw:
        return value, pos + len(raw)
    value, end = read_long(buf, pos)
    _last_time[0] = (buf[pos:end], value)  # one tuple: other threads see a whole pair
    return value, end


_last_time: list[tuple[bytes, int]] = [(b"\x00", 0)]


def _read_name(buf: bytes, pos: int) -> tuple[str, int]:
    """A string from a small set (topics, election kinds), shared."""
    head = buf[pos]
    if head >= 0x80 or head & 1:  # 64 bytes or longer (or a negative length)
        return read_string(buf, pos)
    end = pos + 1 + (head >> 1)
    if end > len(buf):
        raise ValueError("string runs past the end of the record")
    raw = buf[pos + 1 : end]
    name = _NAMES.get(raw)
    if name is None:
        name = raw.decode()
        if len(_NAMES) >= _INTERN_LIMIT:
            _NAMES.clear()
        _NAMES[raw] = name
    return name, end


def _read_ids(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    head = buf[pos]
    if head == 0:
        return (), pos + 1
    if head < 0x80 and not head & 1:  # one block of fewer than 64 items
        end = pos + 1 + (head >> 1)
        raw = buf[pos + 1 : end]
        ids = _IDS.get(raw)
        if ids is not None and buf[end] == 0:
            return ids, end + 1
    ids, end = read_int_array(buf, pos)
    if head < 0x80 and not head & 1 and end - pos == len(ids) + 2:  # every id in one byte
        if len(_IDS) >= _INTERN_LIMIT:
            _IDS.clear()
        _IDS[buf[pos + 1 : end - 1]] = ids
    return ids, end


# Slot by slot (slot_setters). Tests compare every decoded field with the constructor's,
# so a new field is not missed.
_new = object.__new__
_KEY_SET: Final = slot_setters(PartitionKey)
_set_key_topic, _set_key_partition = _KEY_SET["topic"], _KEY_SET["partition"]
_SET: Final = slot_setters(PartitionValue)
_set_topic, _set_partition, _set_state = _SET["topic"], _SET["partition"], _SET["state"]
_set_replicas, _set_isr, _set_leader = _SET["replicas"], _SET["isr"], _SET["leader"]
_set_leader_epoch, _set_partition_epoch = _SET["leader_epoch"], _SET["partition_epoch"]
_set_updated_ms, _set_controller_epoch = _SET["updated_ms"], _SET["controller_epoch"]
_set_reassignment, _set_election = _SET["reassignment"], _SET["election"]
_set_elr, _set_last_known_elr = _SET["elr"], _SET["last_known_elr"]
_set_cause = _SET["cause"]
