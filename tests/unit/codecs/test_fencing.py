"""The pure leader-epoch fence (kafkacoord.codecs.fencing): headers, markers, admission."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs import fencing as pure
from kafkacoord.codecs.fencing import (
    EPOCH_HEADER,
    LeaderEpochFence,
    epoch_headers,
    header_epoch,
    marker_epoch,
)
from kafkacoord.codecs.models import (
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.storage import fencing as storage

MARKER_KEY = encode_key(ShardLeaderKey())
COMMIT_KEY = encode_key(OffsetCommitKey("g", "orders", 0))


def marker(epoch: int) -> bytes:
    return encode_value(ShardLeaderValue(epoch, 1, "inc", 0))


def commit(offset: int) -> bytes:
    return encode_value(OffsetCommitValue(offset, "", 1))


@pytest.mark.parametrize("epoch", [-1, 0, 1, 7, 2**31 - 1])
def test_epoch_headers_round_trip(epoch: int) -> None:
    headers = epoch_headers(epoch)
    assert headers == [(EPOCH_HEADER, epoch.to_bytes(4, "big", signed=True))]
    assert header_epoch(headers) == epoch


def test_header_epoch_ignores_untagged_and_malformed_headers() -> None:
    assert header_epoch(None) is None
    assert header_epoch([]) is None
    assert header_epoch([("other", b"\x00\x00\x00\x05")]) is None
    assert header_epoch([(EPOCH_HEADER, b"\x00\x05")]) is None  # wrong size
    assert header_epoch([(EPOCH_HEADER, "0005")]) is None  # not bytes
    assert header_epoch([(EPOCH_HEADER, None)]) is None
    # The first well-formed tag wins, wherever it is.
    assert header_epoch([("x", b"y"), *epoch_headers(3), *epoch_headers(9)]) == 3


def test_marker_epoch_reads_only_shard_leader_values() -> None:
    assert marker_epoch(MARKER_KEY, marker(4)) == 4
    assert marker_epoch(MARKER_KEY, None) is None  # a marker tombstone announces nothing
    assert marker_epoch(MARKER_KEY, b"\x00\x01garbage") is None
    assert marker_epoch(COMMIT_KEY, commit(4)) is None
    assert marker_epoch(None, marker(4)) is None
    assert marker_epoch(b"", marker(4)) is None


def test_a_deposed_leader_is_fenced_after_the_new_marker() -> None:
    fence = LeaderEpochFence()
    one, two = epoch_headers(1), epoch_headers(2)
    assert fence.admit(MARKER_KEY, marker(1), one) and fence.epoch == 1
    assert fence.admit(COMMIT_KEY, commit(5), one)
    assert fence.admit(MARKER_KEY, marker(2), two) and fence.epoch == 2
    assert fence.admit(COMMIT_KEY, commit(7), two)
    # The zombie's writes: a value, a tombstone and garbage, all judged by the header.
    assert not fence.admit(COMMIT_KEY, commit(99), one)
    assert not fence.admit(COMMIT_KEY, None, one)
    assert not fence.admit(b"\xff\x01junk", b"junk", one)
    # Untagged records (written before leader epochs, or by hand) are admitted.
    assert fence.admit(COMMIT_KEY, commit(8), None)
    assert fence.epoch == 2


def test_stale_markers_are_fenced_and_never_move_the_fence() -> None:
    fence = LeaderEpochFence(5)
    assert not fence.admit(MARKER_KEY, marker(3), None)  # announces an older epoch
    assert not fence.admit(MARKER_KEY, marker(9), epoch_headers(4))  # written by a zombie
    assert fence.epoch == 5
    assert fence.admit(MARKER_KEY, marker(5), epoch_headers(5))  # the same epoch again
    assert fence.admit(MARKER_KEY, None, epoch_headers(5))  # a marker tombstone
    assert fence.epoch == 5
    assert fence.admit(MARKER_KEY, marker(6), None) and fence.epoch == 6


def test_storage_keeps_its_api_on_top_of_the_pure_fence() -> None:
    for name in ("EPOCH_HEADER", "epoch_headers", "header_epoch", "marker_epoch"):
        assert getattr(storage, name) is getattr(pure, name), name
    assert issubclass(storage.LeaderEpochFence, LeaderEpochFence)
    fence = storage.LeaderEpochFence(2)
    assert not fence.admit(COMMIT_KEY, commit(1), epoch_headers(1))


def test_the_codecs_fence_imports_no_storage_and_no_kafka_client() -> None:
    code = (
        "import sys, kafkacoord.codecs.fencing\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'confluent_kafka'"
        " or m.startswith(('kafkacoord.storage', 'kafkacoord.coordinator', 'kafkacoord.spark')))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_leader_epoch_decides_then_the_partition_epoch() -> None:
    order, epochs = pure.partition_epoch_order, pure.EpochOrder
    assert order(5, 9, 5, 9) is epochs.SAME
    assert order(6, 0, 5, 9) is epochs.NEWER_LEADER_EPOCH  # the partition epoch does not count
    assert order(4, 99, 5, 9) is epochs.OLDER_LEADER_EPOCH
    assert order(5, 10, 5, 9) is epochs.NEWER_PARTITION_EPOCH
    assert order(5, 8, 5, 9) is epochs.OLDER_PARTITION_EPOCH
    assert [o for o in epochs if o.leader_epoch_differs] == [
        epochs.OLDER_LEADER_EPOCH, epochs.NEWER_LEADER_EPOCH,
    ]  # fmt: skip
