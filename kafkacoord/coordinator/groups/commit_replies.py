"""OffsetCommit responses, one instance per shape of request.

A response names each partition of its request with its error. When every partition
succeeds it depends only on the request's shape (its topics and their partitions),
which a consumer repeats commit after commit. Bodies are frozen, so one instance per
shape serves them all, and its JSON is encoded once for all their replies: the hot
path builds and encodes no model.
"""

from __future__ import annotations

from kafkacoord.coordinator.protocol import ErrorCode, encode_body
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_commit import encode_offset_commit_response
from kafkacoord.coordinator.runtime.shard import Reply, RequestRef

# ((topic, (partition, ...)), ...) in request order.
Shape = tuple[tuple[str, tuple[int, ...]], ...]
# (topic, [(partition, error), ...]) in request order.
Outcomes = list[tuple[str, list[tuple[int, ErrorCode]]]]


class CommitReplies:
    """Bounded: past ``max_entries`` shapes it starts over."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._max_entries = max_entries
        # Per shape: the shared response and its encoded JSON.
        # Per shape: the shared response, and its encoding at each api version (0: JSON).
        self._succeeded: dict[Shape, tuple[api.OffsetCommitResponse, tuple[bytes, bytes]]] = {}

    def reply(self, to: RequestRef, outcomes: Outcomes) -> Reply:
        """The reply for ``outcomes``: its response shared, and encoded once, when every
        partition succeeded."""
        shared = self._shared(outcomes)
        if shared is None:
            return Reply(to, "OffsetCommit", body=_build(outcomes))
        body, encodings = shared
        version = to.api_version
        encoded = encodings[version] if version < len(encodings) else None
        return Reply(to, "OffsetCommit", body=body, encoded=encoded)

    def _shared(
        self, outcomes: Outcomes
    ) -> tuple[api.OffsetCommitResponse, tuple[bytes, bytes]] | None:
        # Plain loops: nested generators cost more than the lookup they lead to.
        topics = []
        for topic, parts in outcomes:
            partitions = []
            for partition, error in parts:
                if error is not ErrorCode.NONE:
                    return None
                partitions.append(partition)
            topics.append((topic, tuple(partitions)))
        shape = tuple(topics)
        shared = self._succeeded.get(shape)
        if shared is None:
            if len(self._succeeded) >= self._max_entries:
                self._succeeded.clear()
            body = _build(outcomes)
            encodings = (encode_body(body), encode_offset_commit_response(body))
            shared = self._succeeded[shape] = (body, encodings)
        return shared


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
