"""The controller as a shard of ``__kc_metadata`` (docs/architecture.md#controller).

:class:`ControllerShard` implements the runtime's ``Shard`` protocol. It is pure: time
comes in as ``now_ms``, randomness from the ``rng`` it is given, and every decision
leaves as a record for the runtime to replay and append. Handlers read the image and
the batch of records they are building; they never mutate the image.

Life cycle:

1. Build it, ``replay`` every record of ``__kc_metadata`` (stale controller epochs are
   ignored), then call ``on_loaded(now)``. It returns the ``ControllerValue`` with
   epoch = highest seen + 1 first, then the decisions of a new controller: re-fencing
   of fenced nodes that still lead or sit in ISRs, elections of leaderless partitions,
   internal topics, the continuation of reassignments and the resumption of deletions.
   Every unfenced node gets a fresh session; the rebalance timer starts.
2. ``handle`` / ``fire_timers`` as requests and deadlines come; ``replay`` their records.
3. ``on_unloaded`` when it stops being the controller.

Timer keys: ``("session", node_id)``, ``("isr-shrink", node_id)``,
``("delete-topic", name)`` and ``"leader-rebalance"``.
"""

from __future__ import annotations

import functools
import logging
import random
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from kafkacoord.codecs.models import DecisionKey, PartitionKey, PartitionValue, Trigger, TriggerKind
from kafkacoord.coordinator.protocol import CONTROLLER_APIS, Body, Empty, ErrorCode, ProtocolError
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Record, Reply, Request, Result, encode_records
from kafkacoord.coordinator.runtime.timers import TimerRetries, Timers
from kafkacoord.gc_pause import (
    FREEZE_AFTER_RECORDS,
    freeze_long_lived,
    gc_paused,
)

from .batch import Batch, DecisionCounter
from .causes import fencing_trigger, request_trigger
from .config import ControllerConfig
from .decision_retention import RETENTION_INTERVAL_MS, RETENTION_TIMER, expire_decisions
from .image import MetadataImage
from .internal_topics import InternalTopics
from .leadership import REBALANCE_TIMER, LeadershipManager
from .nodes import ISR_SHRINK_TIMER, SESSION_TIMER, NodeManager
from .partitions import PartitionManager
from .reassignments import ReassignmentManager
from .rebalance_execution import EXECUTE_TIMER, STEP_INTERVAL_MS, RebalanceExecutor
from .states import ReplicaState, ReplicaStateMachine
from .topic_configs import TopicConfigManager
from .topic_creation import TopicCreator
from .topic_deletion import DELETE_TOPIC_TIMER, TopicDeleter

__all__ = ["ControllerShard"]

log = logging.getLogger(__name__)

Handler = Callable[[Batch, Any], Body]

# A result this large (a failover, a big topic) is mostly new long-lived image state.


def _no_replies(action: Callable[[], None]) -> list[Reply]:
    action()
    return []


@dataclass(frozen=True, slots=True)
class _SoftState:
    """What a handler may change before its records are durable: undone if it fails."""

    replicas: dict[tuple[str, int], dict[int, ReplicaState]]
    timers: dict[Hashable, int]
    rng: tuple[Any, ...]
    decisions: int  # the next decision's sequence


class ControllerShard:
    """The controller state machine: the runtime's ``Shard`` for ``__kc_metadata``.

    Handlers build a :class:`~.batch.Batch` of records over the :class:`~.image.MetadataImage`;
    only :meth:`replay` changes the image. Its epoch is set by :meth:`on_loaded`, and it stops
    answering once a newer controller record is replayed."""

    def __init__(
        self,
        config: ControllerConfig,
        node_id: int,
        incarnation: str,
        *,
        rng: random.Random | None = None,
        elections: Counter[str] | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.config = config
        # Where this controller listens: clients find it in the ControllerRecord.
        self.endpoint = endpoint
        # Leader elections this controller decided, by kind; its owner may share one
        # counter across reloads, so the count outlives each shard instance.
        self.elections: Counter[str] = Counter() if elections is None else elections
        self.node_id = node_id
        self.incarnation = incarnation
        self.rng = rng if rng is not None else random.Random()
        self.image = MetadataImage()
        self.timers = Timers()
        self.retries = TimerRetries()
        self.replica_states = ReplicaStateMachine()
        self.partitions = PartitionManager(config)
        self.nodes = NodeManager(config, self.partitions, self.timers)
        self.reassignments = ReassignmentManager(config, self.partitions, self.replica_states)
        self.topic_creator = TopicCreator(config, self.rng)
        self.topic_configs = TopicConfigManager(config)
        self.deletions = TopicDeleter(config, self.replica_states, self.timers)
        self.internal_topics = InternalTopics(config, self.topic_creator, self.reassignments)
        self.leadership = LeadershipManager(config, self.partitions)
        self.rebalances = RebalanceExecutor(self.reassignments)
        # The epoch this controller writes with; set by on_loaded.
        self.epoch = -1
        # Its count of decisions, from which their ids are made.
        self._decisions = DecisionCounter()
        self._loaded = False
        self._handlers: dict[str, Handler] = {
            "RegisterNode": self.nodes.register,
            "NodeHeartbeat": self._heartbeat,
            "ControlledShutdown": self.nodes.controlled_shutdown,
            "FenceNode": self._fence_node,
            "AlterPartition": self._alter_partition,
            "ReplicaStatus": self._replica_status,
            "CreateTopic": self.topic_creator.create,
            "DeleteTopic": self._delete_topic,
            "CreatePartitions": self.topic_creator.create_partitions,
            "AlterTopicConfigs": self.topic_configs.alter,
            "DescribeTopicConfigs": self.topic_configs.describe,
            "AlterReassignments": self.reassignments.alter,
            "ElectLeaders": self.leadership.elect_leaders,
            "StartRebalance": self.rebalances.start,
            "StopRebalance": self.rebalances.stop,
        }

    # -- Shard protocol ----------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        applied = self.image.replay(record)
        key = record.key
        if applied and self.replica_states.has_explicit() and isinstance(key, PartitionKey):
            value = record.value
            assert value is None or isinstance(value, PartitionValue)
            self.replica_states.prune(key.topic, key.partition, value, self.image.live_nodes())

    @property
    def active(self) -> bool:
        """Loaded, and no newer controller has written since."""
        return self._loaded and self.image.controller_epoch <= self.epoch

    def on_loaded(self, now_ms: int) -> Result:
        with gc_paused(self.config.pause_gc_in_handlers):
            return self._on_loaded(now_ms)

    def _on_loaded(self, now_ms: int) -> Result:
        self.timers.clear()
        self.replica_states.clear()
        self.epoch = self.image.controller_epoch + 1
        # A new epoch: its decisions count from 0 (ids are (epoch, count)).
        self._decisions = DecisionCounter()
        self._loaded = True
        batch = self._batch(now_ms)
        # The new epoch goes first: every decision after it carries it.
        batch.put_controller(self.node_id, self.incarnation, self.endpoint)
        self.nodes.start_sessions(batch)
        # A fencing whose partition records did not all make it: finish it, for its cause.
        fenced = {node_id for node_id, node in self.image.nodes.items() if node.fenced}
        for node_id in sorted(self.image.leaders_or_isr_members(fenced)):
            with batch.because(fencing_trigger(node_id, self.image.nodes.get(node_id))):
                self.partitions.on_node_fenced(batch, node_id)
        with batch.because(Trigger(TriggerKind.CONTROLLER_ACTIVATED, node_id=self.node_id)):
            self.partitions.elect_leaderless(batch, sorted(self.image.leaderless()))
            self.deletions.resume(batch)
            self.internal_topics.ensure(batch)
            self.reassignments.resume(batch)
        self._step_rebalance(batch)
        if self.config.auto_leader_rebalance_enable:
            self.timers.schedule(
                REBALANCE_TIMER, now_ms + self.config.leader_imbalance_check_interval_ms
            )
        if self.config.decision_retention_ms > 0:
            self.timers.schedule(RETENTION_TIMER, now_ms + RETENTION_INTERVAL_MS)
        log.info(
            "controller %d active with epoch %d: %d nodes, %d topics, %d partitions",
            self.node_id, self.epoch, len(self.image.nodes), len(self.image.topics),
            self.image.partition_count(),
        )  # fmt: skip
        return self._result(batch)

    def handle(self, request: Request, now_ms: int) -> Result:
        if not self.active:
            return self._error(request, ErrorCode.NOT_CONTROLLER, self._inactive_reason())
        handler = self._handlers.get(request.api)
        spec = CONTROLLER_APIS.get(request.api)
        if handler is None or spec is None:
            return self._error(
                request, ErrorCode.INVALID_REQUEST, f"unknown controller api {request.api!r}"
            )
        if not isinstance(request.body, spec.request):
            return self._error(
                request,
                ErrorCode.INVALID_REQUEST,
                f"{request.api} needs a {spec.request.__name__} body, "
                f"not {type(request.body).__name__}",
            )
        batch = self._batch(now_ms)
        # The image changes only by replay, after the append; replica states, timers and
        # the placement rng change in the handler, so a failure must put them back.
        saved = self._soft_state()
        try:
            with (
                gc_paused(self.config.pause_gc_in_handlers),
                batch.because(request_trigger(request)),
            ):
                body = handler(batch, request.body)
                self.reassignments.settle(batch)
                if request.api != "NodeHeartbeat":  # the common request changes no partition
                    self._step_rebalance(batch)
                # A value no record can hold fails this request here, not the append.
                encode_records(batch.records)
        except ProtocolError as exc:
            self._restore(saved)
            return self._error(request, exc.code, exc.message)
        except Exception:
            self._restore(saved)
            log.exception("controller failed on %s; nothing was written or kept", request.api)
            return self._error(
                request, ErrorCode.UNKNOWN_SERVER_ERROR, f"controller failed on {request.api}"
            )
        return self._result(batch, Reply(request.ref, request.api, body=body))

    def fire_timers(self, now_ms: int) -> Result:
        if not self.active:
            return Result()
        saved = self._soft_state()
        try:
            with gc_paused(self.config.pause_gc_in_handlers):
                return self._fire_timers(now_ms)
        except Exception:
            self._restore(saved)
            raise  # the runtime logs it and backs off

    def _batch(self, now_ms: int) -> Batch:
        config = self.config
        elr = config.default_min_insync_replicas if config.eligible_leader_replicas_enable else None
        return Batch(self.image, self.epoch, now_ms, elr_min_isr=elr, decisions=self._decisions)

    def _soft_state(self) -> _SoftState:
        return _SoftState(self.replica_states.snapshot(), self.timers.snapshot(),
                          self.rng.getstate(), self._decisions.next)  # fmt: skip

    def _restore(self, saved: _SoftState) -> None:
        self.replica_states.restore(saved.replicas)
        self.timers.restore(saved.timers)
        self.rng.setstate(saved.rng)
        self._decisions.next = saved.decisions

    def _fire_timers(self, now_ms: int) -> Result:
        batch = self._batch(now_ms)
        for key in self.timers.pop_due(now_ms):
            # Each timer runs alone, as each of Kafka's is an event of its own: one that
            # fails is undone, logged and retried after a backoff; the others go on.
            mark, saved = batch.mark(), self._soft_state()
            try:
                # What the timer changes may let a reassignment move on: for the same cause.
                if key == RETENTION_TIMER:  # tombstones only: no decision of its own
                    self._expire_decisions(batch, now_ms)
                else:
                    with batch.because(self._timer_trigger(batch, key)):
                        self._fire_timer(batch, key, now_ms)
                        self.reassignments.settle(batch)
                encode_records(batch.records[mark[0] :])
            except Exception as exc:
                batch.rollback(mark)
                self._restore(saved)
                self.retries.retry_or_drop(self.timers.schedule, key, now_ms, exc, "controller")
                continue
            self.retries.succeeded(key)
        self._step_rebalance(batch)
        encode_records(batch.records)
        return self._result(batch)

    def _fire_timer(self, batch: Batch, key: Hashable, now_ms: int) -> None:
        if key == REBALANCE_TIMER:
            more = self.leadership.rebalance_leaders(batch)
            delay = (
                self.config.rebalance_continue_delay_ms
                if more
                else self.config.leader_imbalance_check_interval_ms
            )
            self.timers.schedule(REBALANCE_TIMER, now_ms + delay)
        elif isinstance(key, tuple) and key[0] == SESSION_TIMER:
            node_id = key[1]
            if self.nodes.expire(batch, node_id):
                # Once durable: a deposed controller resuming from a pause fires its
                # overdue timers before its fenced append fails, and fences nobody.
                batch.after_commit.append(
                    lambda: log.info("node %d session expired: fenced", node_id)
                )
        elif isinstance(key, tuple) and key[0] == ISR_SHRINK_TIMER:
            self.nodes.shrink_isrs(batch, key[1])
        elif isinstance(key, tuple) and key[0] == DELETE_TOPIC_TIMER:
            self.deletions.finish(batch, key[1])
        elif key == EXECUTE_TIMER:
            pass  # the step below runs on every timer run
        else:
            log.error("unknown controller timer %r", key)

    def _expire_decisions(self, batch: Batch, now_ms: int) -> None:
        more = expire_decisions(batch, self.config.decision_retention_ms)
        # Tombstones replay once durable: the next run comes after that.
        delay = self.config.rebalance_continue_delay_ms if more else RETENTION_INTERVAL_MS
        self.timers.schedule(RETENTION_TIMER, now_ms + delay)

    def _timer_trigger(self, batch: Batch, key: Hashable) -> Trigger | DecisionKey:
        """The cause of what a timer decides (an auto leader rebalance and a rebalance
        plan's steps refine it per partition)."""
        if isinstance(key, tuple) and key[0] == SESSION_TIMER:
            return self.nodes.expiry_trigger(key[1])
        if isinstance(key, tuple) and key[0] == ISR_SHRINK_TIMER:
            return self.nodes.fencing_trigger(batch, key[1])
        if isinstance(key, tuple) and key[0] == DELETE_TOPIC_TIMER:
            return Trigger(TriggerKind.TOPIC_DELETED)
        if key == REBALANCE_TIMER:
            return Trigger(TriggerKind.LEADER_REBALANCE)
        return Trigger(TriggerKind.REBALANCE_PLAN)  # the execute timer; nothing else is due

    def _step_rebalance(self, batch: Batch) -> None:
        """Move a running rebalance on; its timer ticks while it runs."""
        if self.rebalances.step(batch):
            if EXECUTE_TIMER not in self.timers:
                self.timers.schedule(EXECUTE_TIMER, batch.now_ms + STEP_INTERVAL_MS)
        else:
            self.timers.cancel(EXECUTE_TIMER)

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline() if self.active else None

    def on_unloaded(self) -> list[Reply]:
        # The controller parks no request: nothing to answer.
        self._loaded = False
        self.timers.clear()
        return []

    # -- handlers that need more than one manager --------------------------------------------

    def _heartbeat(self, batch: Batch, body: api.NodeHeartbeat) -> Body:
        reply, unfenced = self.nodes.heartbeat(batch, body)
        if unfenced:
            self.internal_topics.ensure(batch)
        return reply

    def _fence_node(self, batch: Batch, body: api.FenceNode) -> Body:
        self.nodes.fence_admin(batch, body)
        return Empty()

    def _alter_partition(self, batch: Batch, body: api.AlterPartition) -> Body:
        self.partitions.alter_partition(batch, body)
        # A grown ISR may let a reassignment finish: answer with the final state.
        self.reassignments.settle(batch)
        value = batch.partition(body.topic, body.partition)
        assert value is not None
        return api.PartitionStateBody(
            topic=value.topic,
            partition=value.partition,
            leader=value.leader,
            leader_epoch=value.leader_epoch,
            partition_epoch=value.partition_epoch,
            replicas=list(value.replicas),
            isr=list(value.isr),
        )

    def _replica_status(self, batch: Batch, body: api.ReplicaStatus) -> Body:
        self.partitions.replica_status(batch, body)
        return Empty()

    def _delete_topic(self, batch: Batch, body: api.DeleteTopic) -> Body:
        self.deletions.delete(batch, body)
        return Empty()

    # -- helpers --------------------------------------------------------------------------------

    def _result(self, batch: Batch, *replies: Reply) -> Result:
        """The records and replies, and the elections they decide counted once durable (a
        load replays history, so only this controller's own decisions are counted)."""
        if self.config.pause_gc_in_handlers and len(batch.records) >= FREEZE_AFTER_RECORDS:
            # Before the collector sees the batch's allocations as a quarter of the heap
            # and walks all of it (0.9 s at a million partitions): see kafkacoord/gc_pause.py.
            freeze_long_lived()
        kinds = self._elections_in(batch.records)
        result = Result(batch.records, list(replies))
        if kinds:
            result.actions.append(functools.partial(self._count_elections, kinds))
        for then in batch.after_commit:
            result.actions.append(functools.partial(_no_replies, then))
        return result

    def _elections_in(self, records: list[Record]) -> Counter[str]:
        """Election kinds of the records that give a partition a new leader."""
        kinds: Counter[str] = Counter()
        leaders: dict[tuple[str, int], int] = {}
        for record in records:
            value = record.value
            if type(value) is not PartitionValue:
                continue
            tp = (value.topic, value.partition)
            old = leaders.get(tp)
            if old is None:
                current = self.image.partition(*tp)
                old = -1 if current is None else current.leader
            if value.leader >= 0 and value.leader != old:
                kinds[value.election or "unknown"] += 1
            leaders[tp] = value.leader
        return kinds

    def _count_elections(self, kinds: Counter[str]) -> list[Reply]:
        self.elections.update(kinds)
        return []

    def _inactive_reason(self) -> str:
        if not self._loaded:
            return f"node {self.node_id} is not the active controller (not loaded)"
        return (
            f"node {self.node_id} is no longer the controller: epoch "
            f"{self.image.controller_epoch} superseded its epoch {self.epoch}"
        )

    @staticmethod
    def _error(request: Request, code: ErrorCode, message: str | None) -> Result:
        return Result([], [Reply(request.ref, request.api, error=code, message=message)])
