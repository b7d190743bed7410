"""Records keep their bytes once encoded; a value its Avro type cannot hold fails early."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafkacoord.codecs import CodecError, decode_record, encode_record
from kafkacoord.codecs.models import (
    AvroModel,
    NodeKey,
    NodeValue,
    OffsetCommitValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
)
from kafkacoord.coordinator.groups.records import (
    offset_commit_record,
    offset_commit_tombstone,
    offset_commit_value,
)
from kafkacoord.coordinator.runtime import shard as runtime_shard
from kafkacoord.coordinator.runtime.shard import Record, encode_records, raw_records

INT_MAX = 2**31 - 1


def commit(group: str = "g", partition: int = 0, *, leader_epoch: int = 3) -> Record:
    value = offset_commit_value(42, leader_epoch, "meta", 1_700_000_000_000, -1)
    return offset_commit_record(group, "t", partition, value)


def partition_value(**overrides: Any) -> PartitionValue:
    fields: dict[str, Any] = {
        "topic": "t", "partition": 0, "state": PartitionState.ONLINE, "replicas": (1, 2),
        "isr": (1, 2), "leader": 1, "leader_epoch": 0, "partition_epoch": 0,
        "updated_ms": 5, "controller_epoch": 1,
    }  # fmt: skip
    fields.update(overrides)
    return PartitionValue(**fields)


def node_value(**overrides: Any) -> NodeValue:
    fields: dict[str, Any] = {
        "node_id": 1, "incarnation": "inc-1", "node_epoch": 1, "fenced": False,
        "registered_ms": 5, "controller_epoch": 1,
    }  # fmt: skip
    fields.update(overrides)
    return NodeValue(**fields)


def test_records_start_without_bytes() -> None:
    assert commit().raw is None
    assert Record(*_kv(commit())).raw is None


def _kv(record: Record) -> tuple[AvroModel, AvroModel | None]:
    return record.key, record.value


def test_encode_records_keeps_each_records_bytes() -> None:
    records = [commit(partition=0), commit(partition=1), offset_commit_tombstone("g", "t", 2)]
    encode_records(records)
    for record in records:
        assert record.raw == encode_record(record.key, record.value)
    assert records[2].raw is not None and records[2].raw[1] is None  # a tombstone
    key, value = decode_record(*records[0].raw)  # type: ignore[misc]
    assert (key, value) == (records[0].key, records[0].value)


def test_bytes_do_not_change_what_a_record_is() -> None:
    encoded, plain = commit(), commit()
    encode_records([encoded])
    assert encoded == plain  # raw is not compared
    assert "raw" not in repr(encoded)


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the encodes runtime.shard makes."""
    calls = [0]
    original: Callable[..., Any] = encode_record

    def counted(key: AvroModel, value: AvroModel | None) -> Any:
        calls[0] += 1
        return original(key, value)

    monkeypatch.setattr(runtime_shard, "encode_record", counted)
    assert runtime_shard.encode_records is encode_records
    return calls


@pytest.mark.sources
def test_raw_records_reuses_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [commit(partition=p) for p in range(3)]
    calls = counting(monkeypatch)
    encode_records(records)
    assert calls[0] == 3
    kept = [r.raw for r in records]
    raws = raw_records(records)
    assert calls[0] == 3, "raw_records encoded a record that already had its bytes"
    assert raws == kept
    assert all(a is b for a, b in zip(raws, kept, strict=True))
    encode_records(records)  # again: nothing to do
    assert calls[0] == 3


@pytest.mark.sources
def test_raw_records_encodes_only_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [commit(partition=p) for p in range(4)]
    encode_records(records[:2])
    calls = counting(monkeypatch)
    raws = raw_records(records)
    assert calls[0] == 2
    assert raws == [encode_record(r.key, r.value) for r in records]
    assert all(r.raw is not None for r in records)


def test_an_out_of_range_leader_epoch_raises_codec_error_and_keeps_no_bytes() -> None:
    bad = commit(partition=1, leader_epoch=2**31)
    assert isinstance(bad.value, OffsetCommitValue) and bad.value.leader_epoch == 2**31
    with pytest.raises(CodecError):
        encode_records([bad])
    assert bad.raw is None
    with pytest.raises(CodecError):
        raw_records([bad])
    assert bad.raw is None


def test_the_largest_int_fits() -> None:
    edge = commit(leader_epoch=INT_MAX)
    low = commit(partition=1, leader_epoch=-(2**31))
    encode_records([edge, low])
    assert edge.raw is not None and low.raw is not None


def test_a_bad_record_among_good_ones_fails_the_whole_call() -> None:
    good, bad, after = (
        commit(partition=0),
        commit(partition=1, leader_epoch=2**31),
        commit(partition=2),
    )
    with pytest.raises(CodecError):
        raw_records([good, bad, after])
    assert bad.raw is None
    # Once the bad one is gone the rest encode as usual.
    assert raw_records([good, after]) == [encode_record(r.key, r.value) for r in (good, after)]


# Every record type, whichever encoder it takes (a hand-written fast path or fastavro),
# refuses an int its Avro ``int`` or ``long`` cannot hold with a CodecError, before
# anything is written.
OUT_OF_RANGE: dict[str, Callable[[], Record]] = {
    "OffsetCommitValue.leader_epoch": lambda: commit(leader_epoch=2**31),
    "PartitionValue.leader_epoch": lambda: Record(
        PartitionKey("t", 0), partition_value(leader_epoch=2**31)
    ),
    # Through fastavro: a long beyond 64 bits, and an int beyond 32.
    "NodeValue.node_epoch": lambda: Record(NodeKey(1), node_value(node_epoch=2**63)),
    "NodeKey.node_id": lambda: Record(NodeKey(2**31), node_value(node_id=2**31)),
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_an_int_out_of_range_is_a_codec_error_for_every_record_type(case: str) -> None:
    record = OUT_OF_RANGE[case]()
    with pytest.raises(CodecError):
        encode_records([record])
    assert record.raw is None
