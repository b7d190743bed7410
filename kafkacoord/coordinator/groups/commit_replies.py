"""OffsetCommit responses, one instance per shape of request.

A response names each partition of its request with its error. When every partition
succeeds it depends only on the request's shape (its topics and their partitions),
which a consumer repeats commit after commit. Bodies are frozen, so one instance per
shape serves them all and the hot path builds no model.
"""

from __future__ import annotations

from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as api

# ((topic, (partition, ...)), ...) in request order.
Shape = tuple[tuple[str, tuple[int, ...]], ...]
# (topic, [(partition, error), ...]) in request order.
Outcomes = list[tuple[str, list[tuple[int, ErrorCode]]]]


class CommitReplies:
    """Bounded: past ``max_entries`` shapes it starts over."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._max_entries = max_entries
        self._succeeded: dict[Shape, api.OffsetCommitResponse] = {}

    def response(self, outcomes: Outcomes) -> api.OffsetCommitResponse:
        """The response for ``outcomes``; shared when every partition succeeded."""
        if any(error is not ErrorCode.NONE for _, parts in outcomes for _, error in parts):
            return _build(outcomes)
        shape = tuple((topic, tuple(p for p, _ in parts)) for topic, parts in outcomes)
        body = self._succeeded.get(shape)
        if body is None:
            if len(self._succeeded) >= self._max_entries:
                self._succeeded.clear()
            body = self._succeeded[shape] = _build(outcomes)
        return body


def _build(outcomes: Outcomes) -> api.OffsetCommitResponse:
    return api.OffsetCommitResponse(
        topics=[
            api.TopicErrors(
                name=topic,
                partitions=[api.PartitionError(partition=p, error=e) for p, e in parts],
            )
            for topic, parts in outcomes
        ]
    )
