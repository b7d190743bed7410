"""What every group client shares: the request client and the group -> shard mapping."""

from __future__ import annotations

from kafkacoord.storage.topics import InternalTopics

from ..groups.partitioning import partition_for
from ..protocol import Body
from ..transport import RequestClient
from ..transport.client import B


class GroupChannel:
    """Sends group requests to the shard partition of their group."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic_prefix: str = "__kc_",
        offsets_partitions: int = 50,
        responses_partitions: int = 8,
        client_id: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = InternalTopics(prefix=topic_prefix, offsets_partitions=offsets_partitions)
        self.partitions = offsets_partitions
        self.timeout_s = timeout_s
        self.client = RequestClient(
            bootstrap, self.topics.responses, responses_partitions, client_id=client_id
        )

    def shard_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def call(
        self,
        shard: int,
        body: Body,
        response: type[B],
        *,
        timeout_s: float | None = None,
        attempt_timeout_s: float | None = None,
    ) -> B:
        return self.client.call(
            self.topics.group_requests, shard, type(body).__name__, body, response,
            timeout_s=timeout_s or self.timeout_s, attempt_timeout_s=attempt_timeout_s,
        )  # fmt: skip

    def close(self) -> None:
        self.client.close()
