"""OffsetCommit responses shared between commits of the same shape."""

from __future__ import annotations

from kafkacoord.coordinator.groups.commit_replies import CommitReplies, Outcomes
from kafkacoord.coordinator.protocol import ErrorCode, encode_body
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.protocol.binary_commit import (
    decode_offset_commit_response,
    encode_offset_commit_response,
)
from kafkacoord.coordinator.runtime.shard import RequestRef

OK = ErrorCode.NONE


def response(replies: CommitReplies, outcomes: Outcomes) -> api.OffsetCommitResponse:
    body = replies.reply(RequestRef("c", 1), outcomes).body
    assert isinstance(body, api.OffsetCommitResponse)
    return body


def test_successful_commits_of_one_shape_share_one_response() -> None:
    replies = CommitReplies()
    first = response(replies, [("events", [(0, OK), (3, OK)])])
    assert first == api.OffsetCommitResponse(
        topics=[
            api.TopicErrors(
                name="events",
                partitions=[api.PartitionError(partition=0), api.PartitionError(partition=3)],
            )
        ]
    )
    assert response(replies, [("events", [(0, OK), (3, OK)])]) is first
    assert response(replies, [("events", [(3, OK), (0, OK)])]) is not first  # request order


def test_a_partition_error_gets_a_response_of_its_own() -> None:
    replies = CommitReplies()
    outcomes = [("events", [(0, OK), (1, ErrorCode.OFFSET_METADATA_TOO_LARGE)])]
    body = response(replies, outcomes)
    assert [p.error for p in body.topics[0].partitions] == [
        OK,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
    ]
    assert response(replies, outcomes) is not body
    assert response(replies, [("events", [(0, OK), (1, OK)])]).topics[0].partitions[1].error is OK


def test_past_its_bound_it_starts_over() -> None:
    replies = CommitReplies(max_entries=2)
    first = response(replies, [("a", [(0, OK)])])
    response(replies, [("b", [(0, OK)])])
    response(replies, [("c", [(0, OK)])])
    again = response(replies, [("a", [(0, OK)])])
    assert again == first and again is not first


def test_a_shared_response_is_encoded_once_for_all_its_replies() -> None:
    replies = CommitReplies()
    first = replies.reply(RequestRef("c", 1), [("events", [(0, OK)])])
    second = replies.reply(RequestRef("c", 2), [("events", [(0, OK)])])
    assert first.body is second.body and first.encoded is second.encoded
    assert first.encoded == encode_body(first.body)
    assert second.to.correlation_id == 2
    failed = replies.reply(
        RequestRef("c", 3), [("events", [(0, ErrorCode.OFFSET_METADATA_TOO_LARGE)])]
    )
    assert failed.encoded is None  # encoded when sent, like any other body


def test_a_shared_response_is_encoded_at_its_requests_version() -> None:
    replies = CommitReplies()
    json = replies.reply(RequestRef("c", 1), [("events", [(0, OK)])])
    binary = replies.reply(RequestRef("c", 2, api_version=1), [("events", [(0, OK)])])
    again = replies.reply(RequestRef("c", 3, api_version=1), [("events", [(0, OK)])])
    assert json.body is binary.body and binary.encoded is again.encoded
    assert binary.body is not None and binary.encoded is not None
    assert binary.encoded == encode_offset_commit_response(binary.body)  # type: ignore[arg-type]
    assert decode_offset_commit_response(binary.encoded) == json.body
