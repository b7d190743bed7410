"""The connector's fence gives every row the verdict of a record-by-record walk.

The fence moves epochs only at controller records and ShardLeader markers and
compares every other row with the epoch in force, vectorised; these checks run
the Python source's own ``Fence`` and ``LeaderEpochFence`` one record at a time
over random logs, batch boundaries included, and compare. Each worker's memory of
where it left a partition serves the next run without reading the log.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import CodecError, RecordType, decode_record, encode_key, encode_record
from kafkacoord.codecs.fencing import LeaderEpochFence, epoch_headers
from kafkacoord.codecs.models import (
    ControllerKey,
    ControllerValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.spark.connector.fence import EpochMemory, _controller, _leader, fence_batch
from kafkacoord.spark.source.fence import Fence
from kafkacoord.storage.errors import BrokerUnavailableError

Raw = tuple[bytes, bytes | None, int | None]  # key, value, epoch tag

epochs = st.integers(-1, 6)
tags = st.none() | epochs


@st.composite
def offsets_records(draw: st.DrawFn) -> Raw:
    kind = draw(st.sampled_from(["marker", "commit", "tombstone", "bad_marker"]))
    tag = draw(tags)
    if kind == "marker":
        epoch = draw(epochs)
        key, value = encode_record(ShardLeaderKey(), ShardLeaderValue(epoch, 1, "n", 1))
    elif kind == "bad_marker":
        key, value = encode_key(ShardLeaderKey()), b"\x00\x01\x02"
    else:
        key, value = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 1))
        value = None if kind == "tombstone" else value
    return key, value, tag


@st.composite
def metadata_records(draw: st.DrawFn) -> Raw:
    kind = draw(st.sampled_from(["controller", "bad_controller", "tombstone"]))
    key = encode_key(ControllerKey())
    if kind == "controller":
        _, value = encode_record(ControllerKey(), ControllerValue(draw(epochs), 1, "i", 1))
        return key, value, None
    return key, (b"\x00\x02\xff" if kind == "bad_controller" else None), None


def frame(records: list[Raw], topic: str = "__kc_offsets", partition: int = 0,
          first: int = 0) -> pa.RecordBatch:  # fmt: skip
    """Rows as the read hands them to the fence: ``records`` at offsets ``first``.. ."""
    n = len(records)
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([topic] * n, pa.string()),
            "partition": pa.array([partition] * n, pa.int32()),
            "offset": pa.array(range(first, first + n), pa.int64()),
            "key": pa.array([k for k, _, _ in records], pa.binary()),
            "value": pa.array([v for _, v, _ in records], pa.binary()),
            "kind": pa.array([k[0] for k, _, _ in records], pa.int32()),
            "tag": pa.array([t for _, _, t in records], pa.int32()),
        }
    )


def split(records: list[Raw], cut: int) -> list[list[Raw]]:
    cut = min(cut, len(records))
    return [part for part in (records[:cut], records[cut:]) if part]


def walk(records: list[Raw], leader: bool) -> tuple[list[tuple[int, bool]], int]:
    """(epoch in force, admitted) of each record, one record at a time, and the last epoch."""
    got = []
    if leader:
        fence = LeaderEpochFence()
        for key, value, tag in records:
            before = fence.epoch
            got.append(
                (before, fence.admit(key, value, None if tag is None else epoch_headers(tag)))
            )
        return got, fence.epoch
    controller = Fence()
    for key, value, _ in records:
        got.append((controller.epoch, True))
        if value is not None:
            try:
                _, decoded = decode_record(key, value)
            except CodecError:
                continue
            assert isinstance(decoded, ControllerValue)
            controller.admits(RecordType.CONTROLLER, {"epoch": decoded.epoch})
    return got, controller.epoch


def walked(records: list[Raw], leader: bool) -> list[tuple[int, bool]]:
    return walk(records, leader)[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(offsets_records(), min_size=1, max_size=30), st.integers(0, 30))
def test_the_leader_fence_matches_a_record_by_record_walk(records: list[Raw], cut: int) -> None:
    expected, last = walk(records, leader=True)
    got: list[tuple[int, bool]] = []
    epoch = -1
    for part in split(records, cut):  # two micro-batches, the epoch carried between
        at, admitted, epoch = _leader(frame(part), epoch)
        got += [(int(e), bool(a)) for e, a in zip(at, admitted, strict=True)]
    assert got == expected
    assert epoch == last


@settings(max_examples=200, deadline=None)
@given(st.lists(metadata_records(), min_size=1, max_size=30), st.integers(0, 30))
def test_the_controller_fence_matches_a_record_by_record_walk(records: list[Raw],
                                                              cut: int) -> None:  # fmt: skip
    steps, last = walk(records, leader=False)
    expected = [epoch for epoch, _ in steps]
    got: list[int] = []
    epoch = -1
    for part in split(records, cut):
        at, admitted, epoch = _controller(frame(part), epoch)
        assert admitted.all()
        got += [int(e) for e in at]
    assert got == expected
    assert epoch == last


def verdicts(batches: list[pa.RecordBatch]) -> dict[tuple[str, int, int], tuple[int, bool]]:
    rows = pa.Table.from_batches(batches).to_pylist()
    return {(r["topic"], r["partition"], r["offset"]): (r["fence_epoch"], r["admitted"])
            for r in rows}  # fmt: skip


def memory() -> EpochMemory:
    # An address nothing listens on: a scan would stall and fail the test.
    return EpochMemory("127.0.0.1:9", {}, timeout_s=0.5)


Part = tuple[str, int, list[Raw]]


def leader_marker(epoch: int) -> Raw:
    key, value = encode_record(ShardLeaderKey(), ShardLeaderValue(epoch, 1, "n", 1))
    return key, value, epoch


@settings(max_examples=100, deadline=None)
@given(
    st.lists(offsets_records(), min_size=1, max_size=12),
    st.lists(offsets_records(), min_size=1, max_size=12),
    st.lists(metadata_records(), min_size=1, max_size=12),
    st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)),
)
def test_two_micro_batches_of_several_partitions_are_fenced_without_reading_the_log(
    shard0: list[Raw], shard1: list[Raw], meta: list[Raw], cuts: tuple[int, int, int]
) -> None:
    """Each partition a run of its own in each batch, in another order the second time."""
    parts: list[Part] = [("__kc_offsets", 0, shard0), ("__kc_offsets", 1, shard1),
                         ("__kc_metadata", 0, meta)]  # fmt: skip
    first, second = [], []
    for (topic, partition, records), wanted in zip(parts, cuts, strict=True):
        cut = min(wanted, len(records))
        first.append(frame(records[:cut], topic, partition))
        second.insert(0, frame(records[cut:], topic, partition, first=cut))
    worker = memory()
    got = [fence_batch(pa.concat_batches(b), worker) for b in (first, second)]
    expected = {
        (topic, partition, offset): verdict
        for topic, partition, records in parts
        for offset, verdict in enumerate(walked(records, topic.endswith("offsets")))
    }
    assert verdicts(got) == expected
    assert worker.scans == 0


def test_a_replayed_batch_takes_its_epoch_from_memory_and_gets_the_same_verdicts() -> None:
    log: list[Raw] = []
    for epoch in (1, 2, 3):
        log.append(leader_marker(epoch))
        key, value = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(epoch, "", 1))
        log += [(key, value, epoch), (key, value, epoch - 1)]  # the second: a zombie's
    worker = memory()
    fence_batch(frame(log[:4]), worker)
    once = verdicts([fence_batch(frame(log[4:], first=4), worker)])
    again = verdicts([fence_batch(frame(log[4:], first=4), worker)])  # a retried task
    assert once == again
    assert [once[("__kc_offsets", 0, o)] for o in range(4, 9)] == walked(log, True)[4:]
    assert worker.scans == 0


def test_rows_out_of_log_order_are_walked_in_log_order() -> None:
    key, value = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 1))
    log: list[Raw] = [
        leader_marker(2),
        (key, value, 1),
        (key, value, 2),
    ]
    batch = frame(log)
    shuffled = batch.take(pa.array([2, 0, 1]))
    got = verdicts([fence_batch(shuffled, memory())])
    assert [got[("__kc_offsets", 0, o)] for o in range(3)] == [(-1, True), (2, False), (2, True)]


def test_workers_that_share_a_marks_directory_take_turns_without_reading_the_log(
    tmp_path: Path,
) -> None:
    """Spark hands a partition's next batch to whichever Python worker is free."""
    log = [leader_marker(1), leader_marker(2)]
    key, value = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 1))
    log += [(key, value, 1), (key, value, 2), leader_marker(3), (key, value, 2)]
    one, other = (EpochMemory("127.0.0.1:9", {}, 0.5, tmp_path / "marks") for _ in range(2))
    got = verdicts([fence_batch(frame(log[:3]), one), fence_batch(frame(log[3:], first=3), other)])
    assert [got[("__kc_offsets", 0, o)] for o in range(len(log))] == walked(log, True)
    assert one.scans == other.scans == 0
    # A third worker, or the job restarted, retries the second batch.
    again = EpochMemory("127.0.0.1:9", {}, 0.5, tmp_path / "marks")
    assert verdicts([fence_batch(frame(log[3:], first=3), again)]) == {
        k: v for k, v in got.items() if k[2] >= 3
    }
    assert again.scans == 0


def test_a_garbled_mark_is_not_trusted_the_log_is_read_instead(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    (marks / "__kc_offsets-0").write_text("5 7 9\n")  # cut short
    worker = EpochMemory("127.0.0.1:9", {}, 0.5, marks)
    with pytest.raises(BrokerUnavailableError, match="scanning __kc_offsets-0"):
        worker.epoch_at("__kc_offsets", 0, 5, leader=True)
    assert worker.scans == 1
