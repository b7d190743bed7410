"""The append pipeline cuts what many steps handled into batches the broker takes one by
one: at a result's edge, in order, each under MAX_BATCH_BYTES (no broker, no thread: a
writer that only records what it is given)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from kafkacoord.codecs.batch_size import MAX_BATCH_BYTES, batch_bytes
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.runtime.appends import AppendPipeline
from kafkacoord.coordinator.runtime.host_parts import HostParts, HostStats
from kafkacoord.coordinator.runtime.observer import NullObserver
from kafkacoord.coordinator.runtime.reply_cache import ReplyCache
from kafkacoord.coordinator.runtime.shard import (
    RawRecord,
    Record,
    Reply,
    RequestRef,
    Result,
)
from kafkacoord.coordinator.runtime.writer import Delivered
from kafkacoord.storage.fold import offsets_policy


class Recording:
    """A writer that keeps each batch it is given and never finishes one."""

    def __init__(self) -> None:
        self.batches: list[list[RawRecord]] = []

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        raise AssertionError("the pipeline submits")

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        self.batches.append(list(records))

    def close(self) -> None:
        pass


class Replies:
    def send(self, replies: Sequence[Reply]) -> None:
        raise AssertionError("no batch finishes here")


def _pipeline(max_inflight: int) -> tuple[AppendPipeline, Recording]:
    unused = cast(Any, None)
    parts = HostParts(unused, "identity", offsets_policy(60_000), unused, unused, unused)
    stats, observer = HostStats(), NullObserver()
    answered = ReplyCache("offsets-0", entries=10, errors=stats.errors, observer=observer)
    pipeline = AppendPipeline(
        "offsets-0", parts, owner=object(), replies=Replies(), answered=answered,
        stats=stats, observer=observer, clock_ms=lambda: 0,
        unavailable=ErrorCode.NOT_COORDINATOR, max_inflight=max_inflight,
    )  # fmt: skip
    writer = Recording()
    pipeline.writer = writer
    return pipeline, writer


def _result(correlation_id: int, records: int, value_bytes: int) -> Result:
    """A handled request with ``records`` records of ``value_bytes`` each, encoded."""
    raw = [(f"{correlation_id}-{i}".encode(), b"v" * value_bytes) for i in range(records)]
    return Result(
        [Record(cast(Any, None), cast(Any, None), raw=r) for r in raw],
        [Reply(RequestRef("client", correlation_id), "OffsetCommit")],
    )


def test_results_that_cannot_share_a_batch_go_in_batches_of_their_own() -> None:
    pipeline, writer = _pipeline(max_inflight=1)
    # The writer has one batch in flight: what follows waits, and piles up.
    first = _result(1, 1, 100)
    pipeline.add(first)
    pipeline.pump()
    piled = [_result(n, 4, 100_000) for n in range(2, 14)]  # 12 of about 400 kB each
    for result in piled:
        pipeline.add(result)
    pipeline.pump()
    assert len(writer.batches) == 1  # the pipeline is full
    # Let every batch go: the pile goes out in batches that each fit, in order.
    pipeline._max_inflight = 100
    pipeline.pump()
    batches = writer.batches[1:]
    assert [len(b) for b in batches] == [8] * 6  # two results a batch
    assert all(batch_bytes(b) <= MAX_BATCH_BYTES for b in batches)
    sent = [record for batch in batches for record in batch]
    assert sent == [r.raw for result in piled for r in result.records]
    # Nothing finished, and every reply is still held: dropping answers all of them.
    assert pipeline.unanswered
    assert [r.to.correlation_id for r in pipeline.drop()] == list(range(1, 14))


def test_results_that_fit_together_share_one_batch() -> None:
    pipeline, writer = _pipeline(max_inflight=1)
    pipeline.add(_result(1, 1, 10))
    pipeline.pump()
    for n in range(2, 50):
        pipeline.add(_result(n, 2, 1_000))
    pipeline._max_inflight = 2
    pipeline.pump()
    assert [len(b) for b in writer.batches] == [1, 48 * 2]


def test_a_result_larger_than_a_batch_still_goes_whole_and_alone() -> None:
    """The group shard refuses such a handler; anything else that makes one (a timer) is
    not split, as a batch is the unit of a result's atomicity."""
    pipeline, writer = _pipeline(max_inflight=1)
    pipeline.add(_result(1, 1, 10))
    pipeline.pump()
    pipeline.add(_result(2, 2, 10))
    pipeline.add(_result(3, 2, 600_000))  # 1.2 MB
    pipeline.add(_result(4, 2, 10))
    pipeline._max_inflight = 10
    pipeline.pump()
    assert [[key for key, _ in b] for b in writer.batches[1:]] == [
        [b"2-0", b"2-1"], [b"3-0", b"3-1"], [b"4-0", b"4-1"]
    ]  # fmt: skip
