"""The source's leader-epoch fence of offsets topics, without a broker or a Spark session.

Rows must be fenced exactly where the daemon's loader drops records
(:class:`kafkacoord.storage.fold.ChunkFolder`), also when a read starts mid-log
with the epoch the driver's scanner found.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError

from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.fencing import epoch_headers
from kafkacoord.codecs.models import (
    OffsetCommitKey,
    OffsetCommitValue,
    ShardLeaderKey,
    ShardLeaderValue,
)
from kafkacoord.spark.source.fence import EpochScanner
from kafkacoord.spark.source.options import Role, SourceOptions
from kafkacoord.spark.source.read import OffsetRange, _add, _Progress
from kafkacoord.spark.tables import FENCED_REASON, LEADER_FENCED_REASON, _skipped_rows
from kafkacoord.storage.fold import ChunkFolder, offsets_policy
from tests.unit.messages import FakeMessage

TOPIC = "__kc_offsets"


def msg(
    offset: int, key: bytes | None, value: bytes | None, epoch: int | None, error: Any = None
) -> FakeMessage:
    headers = None if epoch is None else epoch_headers(epoch)
    return FakeMessage(key, value, offset, headers, topic=TOPIC, error=error)


def oc(partition: int) -> bytes:
    return encode_key(OffsetCommitKey("g", "orders", partition))


def commit(offset: int) -> bytes:
    return encode_value(OffsetCommitValue(offset, "", 1))


def marker(epoch: int) -> bytes:
    return encode_value(ShardLeaderValue(epoch, epoch, f"n{epoch}", 1))


SHARD_LEADER = encode_key(ShardLeaderKey())

# (key, value, epoch header) at offsets 0..; the zombie is the leader of epoch 1.
LOG: list[tuple[bytes, bytes | None, int | None]] = [
    (SHARD_LEADER, marker(1), 1),  # 0
    (oc(0), commit(5), 1),  # 1
    (oc(1), commit(6), 1),  # 2
    (SHARD_LEADER, marker(2), 2),  # 3
    (oc(0), commit(7), 2),  # 4
    (oc(0), commit(99), 1),  # 5 zombie
    (oc(1), None, 1),  # 6 zombie tombstone
    (oc(2), b"\x00\x01\xff", 1),  # 7 zombie poison
    (SHARD_LEADER, marker(1), 1),  # 8 a zombie's marker
    (SHARD_LEADER, marker(1), None),  # 9 an untagged stale marker
    (oc(2), commit(3), None),  # 10 untagged: admitted
    (oc(1), None, 2),  # 11 the leader's tombstone
]
FENCED = {5, 6, 7, 8, 9}


def messages(start: int = 0) -> list[FakeMessage]:
    return [msg(o, *LOG[o]) for o in range(start, len(LOG))]


def read(start: int = 0, fence_epoch: int = -1, *, fence: bool = True) -> list[dict[str, Any]]:
    options = SourceOptions("unused:9092", (TOPIC,), fence=fence)
    state = _Progress(options, OffsetRange(TOPIC, 0, start, len(LOG), fence_epoch))
    for msg in messages(start):
        _add(state, msg, msg.offset())  # type: ignore[arg-type]
    return pa.Table.from_batches([state.builder.flush()]).to_pylist()


def test_offsets_role_decodes_shard_leader_markers() -> None:
    assert Role.of(TOPIC).allowed == offsets_policy(1).allowed


def test_rows_are_fenced_where_the_loader_drops_records() -> None:
    rows = read()
    assert {r["offset"] for r in rows if r["fenced"]} == FENCED
    by_offset = {r["offset"]: r for r in rows}
    assert by_offset[3]["record_type"] == "SHARD_LEADER" and by_offset[3]["error"] is None
    assert by_offset[3]["shard_leader_record"]["leader_epoch"] == 2
    assert by_offset[6]["tombstone"] and by_offset[6]["record_type"] == "OFFSET_COMMIT"
    assert by_offset[7]["error"] is not None  # poison, yet the header fences it
    assert by_offset[8]["record_type"] == "SHARD_LEADER"
    assert not by_offset[11]["fenced"] and by_offset[11]["tombstone"]

    # The loader over the same records: the same ones are dropped, the same values win.
    folder = ChunkFolder(TOPIC, offsets_policy(10**12), strict=False)
    changes, stats = folder.fold(0, messages())  # type: ignore[arg-type]
    assert stats.fenced == len(FENCED) and stats.poison == 0
    assert changes[oc(0)].value == commit(7)
    assert changes[oc(2)].value == commit(3)
    assert changes[oc(1)].value is None
    assert folder.fence.epoch == 2


def test_a_read_starting_mid_log_needs_the_epoch_in_force() -> None:
    assert {r["offset"] for r in read(4, fence_epoch=2) if r["fenced"]} == FENCED
    # Without it (what the source did before), the zombie's records pass.
    assert not any(r["fenced"] for r in read(4, fence_epoch=-1) if r["offset"] in (5, 6, 7))


def test_fence_false_marks_nothing() -> None:
    assert not any(r["fenced"] for r in read(fence=False))


class FakeConsumer:
    """Serves LOG from the assigned offset; counts what it handed out."""

    def __init__(self) -> None:
        self.position = 0
        self.served: list[int] = []

    def assign(self, partitions: list[Any]) -> None:
        self.position = partitions[0].offset

    def unassign(self) -> None:
        pass

    def consume(self, count: int, timeout: float) -> list[FakeMessage]:
        if self.position >= len(LOG):
            return [msg(len(LOG), None, None, None, error=Eof())]
        got = messages(self.position)[:count]
        self.position += len(got)
        self.served += [m.offset() for m in got]
        return got

    def close(self) -> None:
        pass


class Eof:
    def code(self) -> int:
        return KafkaError._PARTITION_EOF


def test_the_scanner_tracks_shard_leader_markers_forward_only() -> None:
    consumer = FakeConsumer()
    scanner = EpochScanner(consumer, TOPIC, 0, 5.0, leader=True)  # type: ignore[arg-type]
    assert scanner.epoch_at(0) == -1
    assert scanner.epoch_at(3) == 1  # the record at 3 is not before 3
    assert scanner.epoch_at(4) == 2
    # Stale markers (a zombie's, an untagged older one) do not lower it.
    assert scanner.epoch_at(len(LOG)) == 2
    assert consumer.served == list(range(len(LOG)))  # each record read once
    # Going back rescans from the start.
    assert scanner.epoch_at(2) == 1
    assert consumer.served[len(LOG) :] == [0, 1]


def test_the_controller_scanner_ignores_shard_leader_markers() -> None:
    scanner = EpochScanner(FakeConsumer(), TOPIC, 0, 5.0)  # type: ignore[arg-type]
    assert scanner.epoch_at(len(LOG)) == -1


def test_skipped_rows_name_the_fence_of_their_topic() -> None:
    last = pa.array(
        [{"offset": 5, "error": None, "fenced": True}, {"offset": 2, "error": None, "fenced": True},
         {"offset": 3, "error": "bad", "fenced": False}],
        pa.struct([("offset", pa.int64()), ("error", pa.string()), ("fenced", pa.bool_())]),
    )  # fmt: skip
    rows = pa.table(
        {
            "topic": ["__kc_offsets", "__kc_metadata", "__kc_offsets"],
            "partition": pa.array([0, 0, 1], pa.int32()),
            "key": pa.array([b"a", b"b", b"c"], pa.binary()),
            "skipped": pa.array([1, 1, 1], pa.int64()),
            "last_skipped": last,
        }
    )
    table = _skipped_rows(rows)
    assert table.column("kind").to_pylist() == ["fenced", "fenced", "poison"]
    assert table.column("last_error").to_pylist() == [LEADER_FENCED_REASON, FENCED_REASON, "bad"]
