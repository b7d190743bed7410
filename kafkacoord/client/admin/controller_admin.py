"""Admin operations against the active controller, and metadata snapshots.

Writes go to the active controller's listener; reads replay
``__kc_metadata`` into a :class:`MetadataImage`, the controller's own view, so
they work even while no controller is active.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkacoord.client.connector import shared_client
from kafkacoord.client.errors import B, RequestError
from kafkacoord.client.follower import MetadataFollower
from kafkacoord.client.routes import CONTROLLER
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.protocol import Body, Empty, ErrorCode, TopicPartitionRef
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.wire import ClientTls


def read_metadata(bootstrap: str, topic: str, timeout_s: float = 30.0) -> MetadataImage:
    """Replay the metadata log to its end into a fresh image."""
    image = MetadataImage()
    follower = MetadataFollower(
        bootstrap, topic, lambda record, _: image.replay(record), client_id="kafkacoord-admin-read"
    )
    try:
        if not follower.wait_caught_up(timeout_s):
            raise TimeoutError(f"could not read {topic} to its end within {timeout_s:.0f}s")
    finally:
        follower.close()
    return image


class ControllerAdmin:
    """Controller admin calls (topics, nodes, reassignments, elections) and metadata reads."""

    def __init__(
        self,
        bootstrap: str,
        topics: InternalTopics,
        *,
        tls: ClientTls | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.timeout_s = timeout_s
        self._client = shared_client(bootstrap, topic_prefix=topics.prefix, tls=tls)

    def call(self, body: Body, response: type[B]) -> B:
        """Send any controller request and wait for its reply."""
        return self._client.call(CONTROLLER, body, response, timeout_s=self.timeout_s)

    def metadata(self) -> MetadataImage:
        return read_metadata(self.bootstrap, self.topics.metadata, self.timeout_s)

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        *,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        rack_aware: bool = True,
        validate_only: bool = False,
    ) -> api.CreateTopicResponse:
        body = api.CreateTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            replica_assignment=None if replica_assignment is None
            else {p: list(r) for p, r in replica_assignment.items()},
            configs=dict(configs or {}), rack_aware=rack_aware, validate_only=validate_only,
        )  # fmt: skip
        return self.call(body, api.CreateTopicResponse)

    def delete_topic(self, name: str) -> None:
        self.call(api.DeleteTopic(name=name), Empty)

    def create_partitions(
        self, topic: str, count: int, assignment: Sequence[Sequence[int]] | None = None
    ) -> api.CreatePartitionsResponse:
        body = api.CreatePartitions(
            topic=topic, count=count,
            assignment=None if assignment is None else [list(r) for r in assignment],
        )  # fmt: skip
        return self.call(body, api.CreatePartitionsResponse)

    def alter_topic_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str],
        delete_configs: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> api.AlterTopicConfigsResponse:
        body = api.AlterTopicConfigs(topic=topic, set_configs=dict(set_configs),
                                     delete_configs=list(delete_configs),
                                     validate_only=validate_only)  # fmt: skip
        return self.call(body, api.AlterTopicConfigsResponse)

    def describe_topic_configs(self, topic: str) -> list[api.DescribedConfig]:
        body = api.DescribeTopicConfigs(topic=topic)
        return self.call(body, api.DescribeTopicConfigsResponse).configs

    def alter_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> list[api.PartitionResult]:
        body = api.AlterReassignments(
            reassignments=[
                api.ReassignmentTarget(
                    topic=t, partition=p, replicas=None if r is None else list(r)
                )
                for (t, p), r in targets.items()
            ]
        )
        return self.call(body, api.PartitionResults).results

    def elect_leaders(
        self, election_type: str, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[api.PartitionResult]:
        body = api.ElectLeaders(
            election_type=election_type,  # type: ignore[arg-type]
            partitions=None if partitions is None
            else [TopicPartitionRef(topic=t, partition=p) for t, p in partitions],
        )  # fmt: skip
        return self.call(body, api.PartitionResults).results

    def start_rebalance(self, body: api.StartRebalance) -> api.StartRebalanceResponse:
        return self.call(body, api.StartRebalanceResponse)

    def stop_rebalance(self, proposal_id: str | None = None) -> api.StopRebalanceResponse:
        return self.call(api.StopRebalance(proposal_id=proposal_id), api.StopRebalanceResponse)

    def fence_node(self, node_id: int) -> None:
        self.call(api.FenceNode(node_id=node_id), Empty)

    def shutdown_node(self, node_id: int) -> list[TopicPartitionRef]:
        """Controlled shutdown on a node's behalf, with the node epoch it registered with."""
        node = self.metadata().node(node_id)
        if node is None:
            raise RequestError("ControlledShutdown", ErrorCode.BROKER_NOT_AVAILABLE,
                               f"node {node_id} is not registered")  # fmt: skip
        body = api.ControlledShutdown(node_id=node_id, node_epoch=node.node_epoch)
        return self.call(body, api.ControlledShutdownResponse).remaining

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ControllerAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
