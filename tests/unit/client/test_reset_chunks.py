"""A reset's chunks: each one a commit the coordinator takes, whatever the names' length."""

from __future__ import annotations

import pytest

from kafkacoord.client import group_admin
from kafkacoord.client.group_admin import RESET_CHUNK_PARTITIONS, reset_chunks
from kafkacoord.coordinator.protocol import ErrorCode
from tests.unit.groups.groupdriver import Driver, commit_body, partition_errors


@pytest.mark.parametrize(
    ("group", "topic", "partitions", "per_chunk"),
    [
        ("wide-reset", "kc_abcdefwide", 12_000, RESET_CHUNK_PARTITIONS),
        # Kafka's longest names: a partition's records take about 850 bytes.
        ("g" * 249, "t" * 249, 3_000, 1_095),
    ],
)
def test_every_chunk_of_a_reset_is_taken_whole(
    group: str, topic: str, partitions: int, per_chunk: int
) -> None:
    offsets = {(topic, p): 2**62 + p for p in range(partitions)}  # the widest offsets
    chunks = reset_chunks(group, offsets)
    assert [len(c) for c in chunks][:-1] == [per_chunk] * (len(chunks) - 1)
    assert [item for chunk in chunks for item in chunk] == sorted(offsets.items())
    d = Driver()
    for chunk in chunks:
        reply = d.call(commit_body(group, dict(chunk), reset=True))
        assert reply.error is ErrorCode.NONE, reply.message
        assert set(partition_errors(reply).values()) == {ErrorCode.NONE}


def test_without_the_size_budget_a_chunk_of_long_names_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the budget is for: 5,000 partitions of long names do not fit one batch."""
    monkeypatch.setattr(group_admin, "RESET_CHUNK_BYTES", 10**9)
    offsets = {("t" * 249, p): p for p in range(3_000)}
    (chunk,) = reset_chunks("g" * 249, offsets)
    reply = Driver().call(commit_body("g" * 249, dict(chunk), reset=True))
    assert reply.error is ErrorCode.INVALID_COMMIT_OFFSET_SIZE
