"""The connector's fence stage gives every row the verdict of a record-by-record walk.

The stage moves epochs only at controller records and ShardLeader markers and
compares every other row with the epoch in force, vectorised; these checks run
the Python source's own ``Fence`` and ``LeaderEpochFence`` one record at a time
over random logs, batch boundaries included, and compare.
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]
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
from kafkacoord.spark.connector.fence import _controller, _leader
from kafkacoord.spark.source.fence import Fence

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


def frame(records: list[Raw]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [k for k, _, _ in records],
            "value": [v for _, v, _ in records],
            "kind": pd.array([k[0] for k, _, _ in records], dtype="Int32"),
            "tag": pd.array([t for _, _, t in records], dtype="Int32"),
        }
    )


def split(records: list[Raw], cut: int) -> list[list[Raw]]:
    cut = min(cut, len(records))
    return [part for part in (records[:cut], records[cut:]) if part]


@settings(max_examples=200, deadline=None)
@given(st.lists(offsets_records(), min_size=1, max_size=30), st.integers(0, 30))
def test_the_leader_fence_matches_a_record_by_record_walk(records: list[Raw], cut: int) -> None:
    walk = LeaderEpochFence()
    expected = []
    for key, value, tag in records:
        before = walk.epoch
        admitted = walk.admit(key, value, None if tag is None else epoch_headers(tag))
        expected.append((before, admitted))
    got: list[tuple[int, bool]] = []
    epoch = -1
    for part in split(records, cut):  # two micro-batches, the epoch carried between
        at, admitted, epoch = _leader(frame(part), epoch)
        got += [(int(e), bool(a)) for e, a in zip(at, admitted, strict=True)]
    assert got == expected
    assert epoch == walk.epoch


@settings(max_examples=200, deadline=None)
@given(st.lists(metadata_records(), min_size=1, max_size=30), st.integers(0, 30))
def test_the_controller_fence_matches_a_record_by_record_walk(records: list[Raw],
                                                              cut: int) -> None:  # fmt: skip
    walk = Fence()
    expected = []
    for key, value, _ in records:
        expected.append(walk.epoch)
        if value is None:
            continue
        try:
            _, decoded = decode_record(key, value)
        except CodecError:
            continue
        assert isinstance(decoded, ControllerValue)
        walk.admits(RecordType.CONTROLLER, {"epoch": decoded.epoch})
    got: list[int] = []
    epoch = -1
    for part in split(records, cut):
        at, admitted, epoch = _controller(frame(part), epoch)
        assert admitted.all()
        got += [int(e) for e in at]
    assert got == expected
    assert epoch == walk.epoch
