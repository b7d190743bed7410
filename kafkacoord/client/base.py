"""What every group client shares: the process's client and the group -> shard mapping."""

from __future__ import annotations

from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import Body
from kafkacoord.wire import ClientTls

from .connector import CoordinatorClient, shared_client
from .errors import B


class GroupChannel:
    """Sends group requests to the daemon leading the shard of their group."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic_prefix: str = "__kc_",
        offsets_partitions: int = 50,
        tls: ClientTls | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.partitions = offsets_partitions
        self.timeout_s = timeout_s
        self.client: CoordinatorClient = shared_client(
            bootstrap, topic_prefix=topic_prefix, tls=tls
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
            shard, body, response,
            timeout_s=timeout_s or self.timeout_s, attempt_timeout_s=attempt_timeout_s,
        )  # fmt: skip

    def close(self) -> None:
        self.client.close()
