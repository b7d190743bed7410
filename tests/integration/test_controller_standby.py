"""A standby controller follows the metadata log and takes over with only its tail."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Request
from kafkacoord.coordinator.runtime.writer import TransactionalWriter
from kafkacoord.server.services.controller import ControllerService
from kafkacoord.server.services.dispatch import RequestDispatcher, reject
from kafkacoord.server.services.factory import controller_service
from kafkacoord.server.settings import Settings
from kafkacoord.storage.cache import ShardId, StateCache
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import ensure_topics
from kafkacoord.wire import Listener

from .cluster import wait_until

pytestmark = pytest.mark.integration


class Controllers:
    """Controller services, each with a cache and a listener of its own, as in daemons."""

    def __init__(self, bootstrap: str, prefix: str, root: Path, stack: ExitStack) -> None:
        self.bootstrap = bootstrap
        self.root = root
        self.stack = stack
        self.base = Settings(bootstrap=bootstrap, topic_prefix=prefix, offsets_partitions=1,
                             controller_session_timeout_ms=2000, data_dir=root)  # fmt: skip
        self.topics = self.base.topics
        identities = ensure_topics(
            admin_client(bootstrap), self.topics.specs(), replication_factor=1
        )
        self.identity = identities[self.topics.metadata]
        self.caches: dict[int, StateCache] = {}

    def start(self, node_id: int, *, standby: bool = True) -> ControllerService:
        settings = self.base.model_copy(update={"node_id": node_id, "controller_standby": standby})
        cache = self.stack.enter_context(StateCache(self.root / f"cache-{node_id}"))
        self.caches[node_id] = cache
        services: list[ControllerService] = []

        def no_groups(requests: list[tuple[int, Request]]) -> None:
            for _, request in requests:
                reject(request, ErrorCode.NOT_COORDINATOR)

        def to_controller(request: Request) -> None:
            services[0].dispatch(request)  # built below, once the endpoint is known

        listener = Listener("127.0.0.1", 0, RequestDispatcher(to_controller, no_groups)).start()
        self.stack.callback(listener.close)
        service = controller_service(settings, self.bootstrap, cache, self.identity,
                                     config=settings.controller_config(),
                                     endpoint=listener.endpoint)  # fmt: skip
        services.append(service)
        self.stack.callback(service.close)  # before the cache closes (callbacks run LIFO)
        return service.start()

    def first_with_topic(self, partitions: int) -> tuple[ControllerService, ControllerAdmin]:
        """An active controller (node 1), three registered nodes and a topic ``before``."""
        first = self.start(1)
        wait_until(lambda: first.active, 60, "the first controller")
        admin = ControllerAdmin(self.bootstrap, self.topics, timeout_s=60)
        self.stack.callback(admin.close)
        _setup_cluster(admin)
        admin.create_topic("before", partitions, 2)
        return first, admin

    def log_end(self, node_id: int) -> int:
        checkpoint = self.caches[node_id].shard(ShardId(self.topics.metadata, 0)).checkpoint()
        assert checkpoint is not None
        return checkpoint.next_offset


@pytest.fixture
def controllers(bootstrap: str, prefix: str, tmp_path: Path) -> Iterator[Controllers]:
    with ExitStack() as stack:
        yield Controllers(bootstrap, prefix, tmp_path, stack)


def _setup_cluster(admin: ControllerAdmin) -> None:
    for node in (1, 2, 3):
        registered = admin.call(api.RegisterNode(node_id=node, incarnation=f"n{node}"),
                                api.RegisterNodeResponse)  # fmt: skip
        admin.call(api.NodeHeartbeat(node_id=node, node_epoch=registered.node_epoch),
                   api.NodeHeartbeatResponse)  # fmt: skip


def _placement(service: ControllerService) -> dict[tuple[str, int], tuple[int, list[int]]]:
    shard = service.shard
    assert shard is not None
    image = shard.image
    return {(v.topic, v.partition): (v.leader, list(v.replicas)) for v in image.all_partitions()}


def test_a_standby_takes_over_reading_only_the_logs_tail(controllers: Controllers) -> None:
    first, admin = controllers.first_with_topic(40)

    standby = controllers.start(2)
    wait_until(lambda: standby.joined, 60, "the standby in the election group")
    assert not standby.elected
    # The standby folds the log while the first controller serves.
    wait_until(lambda: (standby.standby_offset or 0) >= controllers.log_end(1), 60, "following")
    caught_up = standby.standby_offset
    assert caught_up is not None and standby.host is None
    admin.create_topic("after", 10, 3)  # in the tail, or in one more standby pass
    log_end = controllers.log_end(1)
    expected = _placement(first)
    assert first.host is not None
    written = first.host.stats.records_written

    first.close()
    wait_until(lambda: standby.active, 60, "the standby's takeover")
    host = standby.host
    assert host is not None
    # It read at most what the log gained since the standby caught up (offsets also
    # count transaction markers), far less than the first controller wrote...
    assert host.stats.log_records_read <= log_end - caught_up
    assert host.stats.log_records_read < written
    # ...yet holds the whole state, as a load from the log start would.
    assert _placement(standby) == expected
    assert standby.shard is not None and standby.shard.epoch is not None
    assert standby.standby_offset is None  # the host owns the cache now


def test_without_standby_a_takeover_reads_the_whole_log(controllers: Controllers) -> None:
    first, _ = controllers.first_with_topic(20)

    cold = controllers.start(2, standby=False)
    wait_until(lambda: cold.joined, 60, "the second daemon in the election group")
    expected = _placement(first)
    assert first.host is not None
    written = first.host.stats.records_written
    assert cold.standby_offset is None
    first.close()
    wait_until(lambda: cold.active, 60, "the takeover")
    assert cold.host is not None
    assert cold.host.stats.log_records_read >= written
    assert _placement(cold) == expected


def test_each_successor_follows_the_log_of_the_controller_before(controllers: Controllers) -> None:
    first = controllers.start(1)
    wait_until(lambda: first.active, 60, "the first controller")
    second = controllers.start(2)
    wait_until(lambda: second.joined and second.standby_offset is not None, 60, "following")
    admin = ControllerAdmin(controllers.bootstrap, controllers.topics, timeout_s=60)
    controllers.stack.callback(admin.close)
    _setup_cluster(admin)

    first.close()
    wait_until(lambda: second.active, 60, "the second controller")
    third = controllers.start(3)
    wait_until(lambda: third.joined, 60, "the third daemon in the election group")
    wait_until(lambda: (third.standby_offset or 0) >= controllers.log_end(2), 60, "following")
    admin.create_topic("late", 12, 2)
    expected = _placement(second)
    second.close()
    wait_until(lambda: third.active, 60, "the third controller")
    assert _placement(third) == expected


def test_a_lease_won_again_while_the_last_activation_stops_is_taken_up(
    controllers: Controllers,
) -> None:
    """A broker restart ends the lease and grants it again before the controller has
    stopped: the election calls lost, then won, back to back. The second call once found
    the host still stopping and was dropped, so the daemon held the lease and served
    nothing until it restarted (found by the fault campaign, tests/nemesis)."""
    service = controllers.start(1)
    wait_until(lambda: service.active, 60, "the first controller")
    first = service.host
    assert service.elected
    service._deactivate()  # what the election calls when its lease ends ...
    service._activate()  # ... and when it wins the next one, back to back
    wait_until(lambda: service.active and service.host is not first, 60, "the next activation")
    assert service.activations == 2
    admin = ControllerAdmin(controllers.bootstrap, controllers.topics, timeout_s=30)
    try:
        _setup_cluster(admin)  # the reactivated controller serves
    finally:
        admin.close()


def test_a_controller_fenced_while_it_holds_the_lease_takes_the_controller_back(
    controllers: Controllers,
) -> None:
    """A daemon that lost the lease but opened the controller's writer before it noticed
    fences the one that won. The winner, still holding the lease, activates again; it
    once stepped down for good and the cluster had no controller for four minutes
    (found by the fault campaign on tansu, seed 1127)."""
    service, admin = controllers.first_with_topic(4)
    assert service.elected and service.activations == 1
    zombie = TransactionalWriter(
        controllers.bootstrap, controllers.topics.metadata, 0,
        transactional_id=f"{controllers.topics.prefix}controller",
    )  # fmt: skip
    try:
        # The controller's next transaction is refused; it activates again and serves.
        admin.create_topic("after", 2, 2)
    finally:
        zombie.close()
    assert service.activations == 2
    assert service.active and service.elected


def test_a_daemon_that_lost_the_lease_does_not_open_the_controllers_writer(
    controllers: Controllers,
) -> None:
    """An activation that runs after its lease ended (a reload after a failed append,
    say) stops before it opens the writer, so the controller that won is not fenced."""
    first, admin = controllers.first_with_topic(4)
    second = controllers.start(2)
    wait_until(lambda: second.joined, 60, "the second daemon in the election group")
    election = first._election
    assert election is not None
    election.close()  # the lease ends: the second daemon wins it
    wait_until(lambda: second.active, 60, "the second controller")
    epoch = second.epoch
    first._activate()  # late, as a reload would
    wait_until(lambda: first.host is not None and first.host.finished, 30, "the late one")
    admin.create_topic("after", 2, 2)
    assert second.active and second.epoch == epoch and second.activations == 1
    assert not first.active
