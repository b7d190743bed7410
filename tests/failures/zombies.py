"""Zombie writers: a daemon frozen with SIGSTOP comes back after others took over.

(a) The active controller's daemon is stopped until another daemon is controller with
    a higher epoch; the new controller creates a topic; then the zombie continues. It
    had a CreateTopic request queued (sent straight to its listener while it was
    frozen, so only the zombie reads it) and its own timers due. Whatever it tries to
    write is fenced by the broker (the transactional id) or ignored on replay (a stale
    controller epoch): the metadata read from the log afterwards is what the new
    controller wrote.
(b) The daemon leading a group's shard is stopped until the controller moves the shard
    (its node session expires); a commit goes through the new leader; then the zombie
    continues with a commit queued to it (on its listener) and a member's session
    timer due. Its writer is fenced (by the broker, or by the new leader's epoch: its
    records then land with an older leader epoch and every reader ignores them), and
    the committed offsets are exactly what the new leader acknowledged, also once the
    shard is loaded from the log by another daemon.

Neither zombie may acknowledge what it was sent while frozen: its answer is an error
or none at all, never a success for a write the log then ignores.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kafkacoord.client import ClassicProtocolMember
from kafkacoord.client.connector import CoordinatorClient, error_of
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER
from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.models import ControllerValue, PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.wire import ResponseFrame

from .broker import BrokerControl
from .harness import (
    FailureCluster,
    groups_on_shard,
    read_log,
    report,
    stale_epoch_records,
    wait_until,
)

DAEMONS = (100, 101, 102)
NODES = (1, 2)
SHARDS = 3
TOPIC = "zombie-events"
PARTITIONS = 3
MEMBER_SESSION_MS = 6000  # group.min.session.timeout.ms

T = TypeVar("T")


@dataclass
class ZombieFigures:
    zombie_writes_rejected: int
    fenced_appends: int
    stale_records: int
    aborted_records: int
    zombie_replies: str
    seconds: float


def _stale_and_aborted(cluster: FailureCluster, after_offset: int) -> tuple[int, int]:
    """Metadata records past ``after_offset``: committed ones a replay ignores as stale,
    and ones that reached the log only inside aborted transactions."""
    committed = read_log(cluster.bootstrap, cluster.topics.metadata, 0)
    everything = read_log(cluster.bootstrap, cluster.topics.metadata, 0, committed=False)
    kept = {offset for offset, _, _ in committed}
    aborted = sum(1 for o, _, _ in everything if o > after_offset and o not in kept)
    epoch = -1
    stale = 0
    for offset, key, value in committed:
        try:
            _, decoded = decode_record(key, value)
        except CodecError:
            continue
        record_epoch = (decoded.epoch if isinstance(decoded, ControllerValue)
                        else getattr(decoded, "controller_epoch", None))  # fmt: skip
        if record_epoch is None:
            continue  # a tombstone: carries no epoch
        if record_epoch < epoch:
            stale += offset > after_offset
        else:
            epoch = record_epoch
    return stale, aborted


def _controller_record_offset(cluster: FailureCluster, epoch: int) -> int:
    for offset, key, value in read_log(cluster.bootstrap, cluster.topics.metadata, 0):
        try:
            _, decoded = decode_record(key, value)
        except CodecError:
            continue
        if isinstance(decoded, ControllerValue) and decoded.epoch == epoch:
            return offset
    raise AssertionError(f"no controller record of epoch {epoch}")


def _outcome(future: Future[ResponseFrame], timeout_s: float) -> str:
    """What the zombie answered to the request queued to it (if it got to it)."""
    try:
        reply = future.result(timeout=timeout_s)
    except Exception as exc:
        return f"no reply ({type(exc).__name__})"
    return error_of(reply).name


def _changed_by(before: MetadataImage, after: MetadataImage) -> dict[str, int]:
    """Every value that differs between two images, with the controller epoch it carries."""
    b_controller, b_nodes, b_topics, b_parts = before.snapshot()
    a_controller, a_nodes, a_topics, a_parts = after.snapshot()
    changed: dict[str, int] = {}
    for kind, old, new in (("node", b_nodes, a_nodes), ("topic", b_topics, a_topics),
                           ("partition", b_parts, a_parts)):  # fmt: skip
        for key in set(old) | set(new):
            if old.get(key) != new.get(key):
                value = new.get(key)
                changed[f"{kind} {key}"] = -1 if value is None else value.controller_epoch
    if a_controller != b_controller:
        changed["controller"] = -1 if a_controller is None else a_controller.epoch
    return changed


def run_controller_zombie(broker: BrokerControl, root: Path) -> ZombieFigures:
    started = time.monotonic()
    with FailureCluster(broker, root, offsets_partitions=SHARDS) as cluster:
        for node in DAEMONS:
            cluster.start_daemon(node)
        cluster.wait_ready(DAEMONS)
        for node in NODES:
            cluster.start_node(node)
        wait_until(lambda: set(NODES) <= cluster.image().live_nodes(), what="service nodes live")
        cluster.admin.create_topic("before-zombie", replica_assignment={0: [1, 2]})

        old = cluster.active_controller()
        assert old is not None
        zombie = old.node_id
        zombie_endpoint = cluster.endpoint(zombie)
        assert old.endpoint == zombie_endpoint, (old.endpoint, zombie_endpoint)
        cluster.pause(zombie)
        # Only the zombie will read this: it goes to the zombie's own listener (whose
        # kernel accepts the connection and holds the bytes while the process is frozen),
        # one attempt, never rerouted to the new controller.
        with CoordinatorClient(cluster.bootstrap, topic_prefix=cluster.prefix) as client:
            _, queued = client.send(
                CONTROLLER, api.CreateTopic(name="zombie-topic", replica_assignment={0: [1, 2]}),
                endpoint=zombie_endpoint,
            )  # fmt: skip

            def taken_over() -> ControllerValue | None:
                current = cluster.active_controller()
                if current is None or current.epoch <= old.epoch or current.node_id == zombie:
                    return None
                return current

            new = wait_until(taken_over, timeout_s=60, what="a new controller")
            created = cluster.admin.create_topic("after-zombie", replica_assignment={0: [2, 1]})
            assert created.assignment == {0: [2, 1]}
            takeover = _controller_record_offset(cluster, new.epoch)
            expected = cluster.image()
            stopped_before = len(cluster.events(zombie, "shard stopped"))

            cluster.resume(zombie)
            # The zombie notices it lost the lease (or its writer is fenced) and stops its
            # controller shard.
            wait_until(
                lambda: len(cluster.events(zombie, "shard stopped")) > stopped_before,
                timeout_s=60, what="the zombie controller stepped down",
            )  # fmt: skip
            replied = _outcome(queued, 15)
            assert cluster.alive(zombie), "the zombie daemon died instead of stepping down"
        assert replied != ErrorCode.NONE.name, "the zombie controller acknowledged a CreateTopic"

        # The lease may move once more as the zombie's daemon rejoins the election (it
        # then writes under a newer epoch of its own); wait until a controller serves.
        cluster.admin.create_topic("after-resume", replica_assignment={0: [1, 2]})
        after = cluster.image()
        assert after.controller is not None and after.controller.epoch >= new.epoch

        # Whatever the zombie wanted is nowhere; the new controller's state is intact.
        assert after.topic("zombie-topic") is None
        assert {n: t for n, t in after.topics.items() if n != "after-resume"} == expected.topics
        # Anything that changed since was written under the new controller's epoch or a
        # later one, never under the zombie's.
        foreign = {k: e for k, e in _changed_by(expected, after).items() if e < new.epoch}
        assert not foreign, f"changed under an older controller epoch: {foreign}"
        epochs = cluster.controller_epochs()
        assert all(a < b for a, b in itertools.pairwise(epochs)), epochs

        fenced = len(cluster.fenced_writers(zombie, "controller"))
        stale, aborted = _stale_and_aborted(cluster, takeover)
        figures = ZombieFigures(
            zombie_writes_rejected=fenced + stale,
            fenced_appends=fenced,
            stale_records=stale,
            aborted_records=aborted,
            zombie_replies=replied,
            seconds=round(time.monotonic() - started, 1),
        )
    report("zombie_controller", broker, figures)
    return figures


def run_shard_zombie(broker: BrokerControl, root: Path) -> ZombieFigures:
    started = time.monotonic()
    with FailureCluster(broker, root, offsets_partitions=SHARDS) as cluster:
        for node in DAEMONS:
            cluster.start_daemon(node)
        image = cluster.wait_ready(DAEMONS)
        controller = image.controller.node_id if image.controller else None
        states = _shards_with_standby(cluster)
        # Prefer a shard whose leader is not the controller, so only the shard fails over.
        shard = next((v.partition for v in states if v.leader != controller), 0)
        zombie = cluster.shard_leader(shard)
        assert zombie is not None
        commit_group, member_group = groups_on_shard(f"{cluster.prefix}zg-", shard, SHARDS, 2)
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        channel = cluster.group_channel(timeout_s=90)
        admin = cluster.group_admin()

        def commit(offsets: dict[tuple[str, int], int]) -> None:
            reply = channel.call(shard, _commit_body(commit_group, offsets), g.OffsetCommitResponse)
            errors = [p.error for t in reply.topics for p in t.partitions]
            assert errors == [ErrorCode.NONE] * len(offsets), errors

        def committed() -> dict[tuple[str, int], int]:
            return {tp: p.offset for tp, p in admin.committed(commit_group).items()}

        commit({tp: 10 + tp[1] for tp in tps})
        # A member whose session timer is overdue when the zombie wakes up: the zombie's
        # first turn expires it and writes the group's new state.
        member = ClassicProtocolMember(
            cluster.bootstrap, member_group, [TOPIC], topic_prefix=cluster.prefix,
            offsets_partitions=SHARDS, session_timeout_ms=MEMBER_SESSION_MS,
            heartbeat_interval_ms=500,
            partition_counts=lambda topics: dict.fromkeys(topics, PARTITIONS),
        ).start()  # fmt: skip
        try:
            assert member.wait_assigned(60), "the member never got an assignment"
            shard_name = f"offsets-{shard}"
            fenced_before = len(cluster.fenced_writers(zombie, shard_name))

            zombie_endpoint = cluster.endpoint(zombie)
            assert cluster.node_endpoint(zombie) == zombie_endpoint
            cluster.pause(zombie)
            paused_at = time.monotonic()
            with CoordinatorClient(cluster.bootstrap, topic_prefix=cluster.prefix) as client:
                # Only the zombie reads this: it goes to the zombie's own listener, one
                # attempt, never rerouted to the new leader.
                _, queued = client.send(
                    shard, _commit_body(commit_group, {tp: 999 for tp in tps}),
                    endpoint=zombie_endpoint,
                )  # fmt: skip
                leader = wait_until(
                    lambda: (n := cluster.shard_leader(shard)) not in (None, zombie) and n,
                    timeout_s=90, what="the shard moved to another daemon",
                )  # fmt: skip
                acknowledged = {tp: 20 + tp[1] for tp in tps}
                commit(acknowledged)
                # The member's session on the zombie must be over before it wakes up.
                time.sleep(max(0.0, paused_at + MEMBER_SESSION_MS / 1000 + 2 - time.monotonic()))

                cluster.resume(zombie)
                try:
                    wait_until(
                        lambda: len(cluster.fenced_writers(zombie, shard_name)) > fenced_before,
                        timeout_s=60, what="the zombie's shard writer fenced",
                    )  # fmt: skip
                except AssertionError as exc:
                    raise AssertionError(
                        f"{exc}\nzombie {zombie}:\n{cluster.log_tail(zombie)}"
                    ) from None
                replied = _outcome(queued, 15)
            assert cluster.alive(zombie), "the zombie daemon died instead of stepping down"
            assert replied != ErrorCode.NONE.name, "the zombie shard leader acknowledged a commit"
            assert committed() == acknowledged
            # The member is still in the group: the zombie's expiry of it never counted.
            [described] = admin.describe_groups([member_group])
            assert [m.member_id for m in described.members] == [member.member_id]

            # And a leader that loads the shard from the log ignores the zombie's records too.
            _shards_with_standby(cluster)
            cluster.kill(leader)
            wait_until(lambda: cluster.shard_leader(shard) not in (None, leader), timeout_s=90,
                       what="the shard moved again")  # fmt: skip
            try:
                reloaded = wait_until(lambda: _or_none(committed), timeout_s=60, what="offsets")
            except AssertionError as exc:
                tails = "\n".join(f"daemon {n} (alive: {cluster.alive(n)}):\n{cluster.log_tail(n)}"
                                  for n in DAEMONS if n != leader)  # fmt: skip
                raise AssertionError(f"{exc}; shard {shard} state {cluster.shard_state(shard)}\n"
                                     f"{tails}") from None  # fmt: skip
            assert reloaded == acknowledged
        finally:
            member.close()
        fenced = len(cluster.fenced_writers(zombie, shard_name)) - fenced_before
        stale = stale_epoch_records(cluster.bootstrap, cluster.topics.offsets, shard)
        aborted = len(read_log(cluster.bootstrap, cluster.topics.offsets, shard, committed=False))
        aborted -= len(read_log(cluster.bootstrap, cluster.topics.offsets, shard))
        figures = ZombieFigures(
            zombie_writes_rejected=fenced + stale + aborted,
            fenced_appends=fenced,
            stale_records=stale,
            aborted_records=aborted,
            zombie_replies=replied,
            seconds=round(time.monotonic() - started, 1),
        )
    report("zombie_shard", broker, figures)
    return figures


def _shards_with_standby(cluster: FailureCluster) -> list[PartitionValue]:
    """Every shard led, with another daemon in sync to take it over."""

    def ready() -> list[PartitionValue] | None:
        states = [cluster.shard_state(s) for s in range(SHARDS)]
        ok = [v for v in states if v is not None and v.leader >= 0 and len(v.isr) >= 2]
        return ok if len(ok) == SHARDS else None

    return wait_until(ready, timeout_s=90, what="every shard with a standby in sync")


def _or_none(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except RequestError:
        return None


def _commit_body(group: str, offsets: dict[tuple[str, int], int]) -> g.OffsetCommit:
    """A standalone commit (no member, generation -1)."""
    by_topic: dict[str, list[g.CommitPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(g.CommitPartition(partition=partition, offset=offset))
    return g.OffsetCommit(
        group_id=group, topics=[g.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    )
