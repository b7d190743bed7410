"""The replies a shard host released, by (client id, correlation id).

A client that lost its connection retries a request with the same ids, maybe on a new
connection: a request already answered for good gets that answer again, not a second
run of its handler (whose records would be appended twice). Retriable errors are not
kept: the retry should run. The cache is bounded; the oldest answer goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from kafkacoord.coordinator.protocol import ErrorCode

from .observer import HostObserver
from .shard import Reply, Request


class ReplyCache:
    """Counts the replies a host releases and keeps the final ones to answer a retry."""

    def __init__(
        self, name: str, *, entries: int, errors: dict[str, int], observer: HostObserver
    ) -> None:
        self._name = name
        self._entries = entries
        self._errors = errors  # the host's error counters, by error name
        self._observer = observer
        self._replies: OrderedDict[tuple[str, int], Reply] = OrderedDict()

    def answer(self, request: Request) -> Reply | None:
        """The answer ``request`` already got, addressed to where it came from this time."""
        cached = self._replies.get((request.ref.client_id, request.ref.correlation_id))
        if cached is None:
            return None
        if cached.to.api_version != request.ref.api_version:
            # A retry at another version (its client met an older daemon): its encoding
            # was the first version's.
            return replace(cached, to=request.ref, encoded=None)
        return replace(cached, to=request.ref)

    def released(self, replies: Sequence[Reply]) -> None:
        """``replies`` go out: count them and keep the final ones."""
        for reply in replies:
            if reply.to.correlation_id < 0:
                continue  # a push (a hint to a member), not the answer to a request
            error = reply.error
            self._observer.answered(self._name, reply.api, error)
            if error is not ErrorCode.NONE:
                self._errors[error.name] = self._errors.get(error.name, 0) + 1
                if error.retriable:
                    continue
            self._replies[(reply.to.client_id, reply.to.correlation_id)] = reply
            if len(self._replies) > self._entries:
                self._replies.popitem(last=False)


__all__ = ["ReplyCache"]
