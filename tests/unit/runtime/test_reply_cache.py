"""A retry gets the answer its request already got, encoded as the retry asked."""

from __future__ import annotations

from kafkacoord.coordinator.groups.commit_replies import CommitReplies
from kafkacoord.coordinator.protocol import ErrorCode, encode_body
from kafkacoord.coordinator.protocol import group_api as api
from kafkacoord.coordinator.runtime.observer import NullObserver
from kafkacoord.coordinator.runtime.reply_cache import ReplyCache
from kafkacoord.coordinator.runtime.shard import Request, RequestRef

BODY = api.OffsetCommit(group_id="g", topics=[])


def cache_with_binary_answer() -> tuple[ReplyCache, bytes]:
    cache = ReplyCache("offsets-0", entries=8, errors={}, observer=NullObserver())
    reply = CommitReplies().reply(RequestRef("c", 7, api_version=1), [("t", [(0, ErrorCode.NONE)])])
    cache.released([reply])
    assert reply.encoded is not None
    return cache, reply.encoded


def test_a_retry_at_the_same_version_gets_the_same_bytes() -> None:
    cache, binary = cache_with_binary_answer()
    again = cache.answer(Request(RequestRef("c", 7, api_version=1), "OffsetCommit", BODY))
    assert again is not None and again.encoded is binary and again.to.api_version == 1


def test_a_retry_at_another_version_is_encoded_again() -> None:
    # Its client met an older daemon on the way and fell back to JSON.
    cache, _ = cache_with_binary_answer()
    again = cache.answer(Request(RequestRef("c", 7), "OffsetCommit", BODY))
    assert again is not None and again.encoded is None and again.body is not None
    assert again.to.api_version == 0
    assert encode_body(again.body).startswith(b'{"topics"')


def test_another_call_gets_no_answer() -> None:
    cache, _ = cache_with_binary_answer()
    assert cache.answer(Request(RequestRef("c", 8, api_version=1), "OffsetCommit", BODY)) is None
