"""A controller timer that fails is undone alone (its part of the batch rolled back, the
soft state put back), logged, retried after a backoff and dropped after five failures in
a row; the other timers of the same run go on. A request whose records cannot be encoded
answers UNKNOWN_SERVER_ERROR and changes nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from kafkacoord.codecs import CodecError
from kafkacoord.codecs.models import (
    Cause,
    DecisionKey,
    NodeKey,
    NodeValue,
    PartitionKey,
    PartitionState,
    PartitionValue,
    Reassignment,
    RebalanceKey,
    RebalanceState,
    RebalanceValue,
    TopicKey,
    TopicValue,
)
from kafkacoord.coordinator.controller.batch import Batch
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.nodes import isr_shrink_timer, session_timer
from kafkacoord.coordinator.controller.states import PartitionPhase
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.coordinator.runtime.shard import Record

from .support import Cluster

BACKOFFS = [100, 200, 400, 800]

# -- Batch savepoints ---------------------------------------------------------------------------


def node(node_id: int, *, fenced: bool = False) -> NodeValue:
    return NodeValue(node_id, f"inc-{node_id}", 1, fenced, 0, 0)


def topic(name: str, partitions: int = 2) -> TopicValue:
    return TopicValue(name, f"id-{name}", partitions, 2, 0, 0)


CAUSE = Cause(DecisionKey(0, 0))


def part(
    name: str,
    p: int,
    replicas: tuple[int, ...] = (1, 2),
    *,
    leader: int = 1,
    isr: tuple[int, ...] | None = None,
    epoch: int = 0,
    reassignment: Reassignment | None = None,
) -> PartitionValue:
    state = PartitionState.ONLINE if leader >= 0 else PartitionState.OFFLINE
    isr = replicas if isr is None else isr
    return PartitionValue(
        name, p, state, replicas, isr, leader, epoch, epoch, 0, 0, reassignment, cause=CAUSE
    )


def rebalance(proposal: str) -> RebalanceValue:
    return RebalanceValue(proposal, RebalanceState.RUNNING, ("leaders",), (), (), 1, 1, 1, 0, 0, 0)


def small_image() -> MetadataImage:
    image = MetadataImage()
    records = [
        *(Record(NodeKey(n), node(n)) for n in (1, 2, 3)),
        Record(TopicKey("t"), topic("t")),
        Record(PartitionKey("t", 0), part("t", 0)),
        Record(PartitionKey("t", 1), part("t", 1, (2, 3), leader=2)),
        Record(TopicKey("gone"), topic("gone", 1)),
        Record(PartitionKey("gone", 0), part("gone", 0, leader=-1, isr=())),
        Record(TopicKey("old"), topic("old", 1)),
        Record(PartitionKey("old", 0), part("old", 0, leader=-1, isr=())),
    ]
    for record in records:
        image.replay(record)
    return image


def view(batch: Batch) -> dict[str, Any]:
    """Everything a handler can read from a batch."""
    return {
        "records": list(batch.records),
        "after_commit": list(batch.after_commit),
        "reassign_keys": dict(batch.reassign_keys),
        "nodes": batch.nodes(),
        "live": batch.live(),
        "topics": {n: batch.topic(n) for n in ("t", "u", "gone", "old")},
        "topic_names": batch.topic_names(),
        "partitions": {
            (t, p): batch.partition(t, p)
            for t, p in [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("gone", 0), ("old", 0)]
        },
        "pending": dict(batch.pending_partitions()),
        "rebalance": batch.rebalance(),
        "led_by_1": sorted(batch.node_partitions(1, lead=True)),
        "isr_of_3": sorted(batch.node_partitions(3, isr=True)),
    }


def before_mark(batch: Batch) -> None:
    batch.put_node(node(1, fenced=True))
    assert batch.put_partition(part("t", 0, leader=2, isr=(2,), epoch=1))
    assert batch.delete_partition("old", 0)
    batch.delete_topic("old")
    moving = Reassignment((2, 3), (3, 1), (1,), (2,), "adding", 0)
    assert batch.put_partition(part("t", 1, (2, 3, 1), leader=2, epoch=1, reassignment=moving))
    batch.put_rebalance(rebalance("first"))
    batch.after_commit.append(lambda: None)


def after_mark(batch: Batch) -> None:
    batch.put_node(node(2, fenced=True))
    batch.put_node(node(4))
    batch.put_node(node(1))  # unfenced again, after the mark
    batch.put_topic(topic("u", 1))
    assert batch.put_partition(part("u", 0, (3,), leader=3), via=PartitionPhase.NEW)
    assert batch.put_partition(part("t", 0, leader=3, isr=(3,), epoch=2))
    assert batch.put_partition(part("t", 1, (2, 3, 1), leader=3, epoch=2))  # reassignment done
    assert batch.delete_partition("gone", 0)
    batch.delete_topic("gone")
    batch.put_topic(topic("t", 3))
    batch.put_existing_partitions([part("t", 2, (3, 1), leader=3)])
    batch.put_rebalance(rebalance("second"))
    batch.after_commit.append(lambda: None)
    batch.after_commit.append(lambda: None)


def test_rollback_restores_the_overlay_at_the_mark() -> None:
    image = small_image()
    batch, expected = Batch(image, 0, 5), Batch(image, 0, 5)
    for b in (batch, expected):
        before_mark(b)
    expected.after_commit = batch.after_commit[:]  # the same callables
    at_mark = view(batch)
    assert at_mark == view(expected)
    assert at_mark["topics"]["old"] is None and at_mark["partitions"][("old", 0)] is None
    assert 1 not in at_mark["live"]
    assert ("t", 1) in at_mark["reassign_keys"]

    mark = batch.mark()
    after_mark(batch)
    changed = view(batch)
    assert changed != at_mark
    assert changed["topics"]["gone"] is None and changed["topics"]["u"] is not None
    assert 1 in changed["live"] and 2 not in changed["live"]

    batch.rollback(mark)
    assert view(batch) == at_mark
    # Tombstones written before the mark stay; those after it are gone.
    assert batch.topic("old") is None and batch.partition("old", 0) is None
    assert batch.topic("gone") == image.topic("gone")
    assert batch.partition("gone", 0) == image.partition("gone", 0)
    # Nodes: the pending fencing of 1 stays, 2's is undone, 4 never registered.
    assert batch.node(1) == node(1, fenced=True)
    assert batch.node(2) == image.node(2) and batch.node(4) is None
    assert batch.live() == frozenset({2, 3})
    assert batch.rebalance() == rebalance("first")
    assert batch.topic_names() == ["gone", "t"]
    assert batch.has_pending_partitions()


def test_the_batch_goes_on_after_a_rollback_as_if_nothing_happened() -> None:
    image = small_image()
    batch, clean = Batch(image, 0, 5), Batch(image, 0, 5)
    for b in (batch, clean):
        before_mark(b)
    mark = batch.mark()
    after_mark(batch)
    batch.rollback(mark)
    for b in (batch, clean):
        after_mark(b)
    assert view(batch) | {"after_commit": None} == view(clean) | {"after_commit": None}
    assert len(batch.after_commit) == len(clean.after_commit)


def test_rollback_to_an_empty_batch_leaves_only_the_image() -> None:
    image = small_image()
    batch = Batch(image, 0, 5)
    untouched = view(batch)
    mark = batch.mark()
    before_mark(batch)
    after_mark(batch)
    batch.rollback(mark)
    assert view(batch) == untouched
    assert batch.records == [] and batch.after_commit == [] and batch.reassign_keys == {}
    assert not batch.has_pending_partitions()
    assert batch.live() == image.live_nodes()
    assert batch.rebalance() is None


def test_a_rollback_can_be_repeated_to_the_same_mark() -> None:
    image = small_image()
    batch = Batch(image, 0, 5)
    before_mark(batch)
    at_mark = view(batch)
    mark = batch.mark()
    for _ in range(2):
        after_mark(batch)
        moving = Reassignment((3,), (1,), (1,), (3,), "adding", 0)
        assert batch.put_partition(
            part("u", 0, (3, 1), leader=3, epoch=3, reassignment=moving), via=PartitionPhase.NEW
        )
        batch.rollback(mark)
        assert view(batch) == at_mark


def test_nested_marks() -> None:
    image = small_image()
    batch = Batch(image, 0, 5)
    outer = batch.mark()
    before_mark(batch)
    at_inner = view(batch)
    inner = batch.mark()
    after_mark(batch)
    batch.rollback(inner)
    assert view(batch) == at_inner
    batch.rollback(outer)
    assert batch.records == [] and batch.nodes() == image.nodes


# -- timers -------------------------------------------------------------------------------------

Spoil = Callable[[Cluster, Batch, int], None]


def throw(c: Cluster, batch: Batch, node_id: int) -> None:
    raise RuntimeError(f"injected failure fencing node {node_id}")


def poison(c: Cluster, batch: Batch, node_id: int) -> None:
    """A partition record no Avro int holds."""
    bad = part("t", 0, (1, 2, 3), leader=node_id, epoch=2**31)
    batch.records.append(Record(PartitionKey("t", 0), bad))


def soft_state(c: Cluster) -> tuple[Any, ...]:
    shard = c.shard
    return shard.replica_states.explicit(), shard.rng.getstate()


def two_expire_together(failing: int, *, seed: int = 7) -> tuple[Cluster, int]:
    """Nodes 1..4; 1 and 2 stop heartbeating at the same instant, 3 and 4 stay alive."""
    c = Cluster(seed=seed)
    c.add_nodes([1, 2, 3, 4])
    c.create("t", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [4, 1, 2]})
    c.create("u", 4, 3)  # placed with the rng
    c.heartbeat_all([1, 2])
    due = c.now + c.config.node_session_timeout_ms
    c.now += 5_000  # 3's and 4's sessions outlast every retry of 1's or 2's
    c.heartbeat_all([3, 4])
    assert c.shard.timers.deadline(session_timer(1)) == due
    assert c.shard.timers.deadline(session_timer(2)) == due
    return c, due


def fail_expiry(
    c: Cluster, failing: int, spoil: Spoil, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    nodes = c.shard.nodes
    original = nodes.expire
    calls = [0]

    def expire(batch: Batch, node_id: int) -> bool:
        fenced = original(batch, node_id)
        if node_id == failing:
            calls[0] += 1
            assert fenced and batch.node(node_id).fenced  # type: ignore[union-attr]
            spoil(c, batch, node_id)
        return fenced

    monkeypatch.setattr(nodes, "expire", expire)
    return calls


@pytest.mark.parametrize("spoil", [throw, poison], ids=["throws", "unencodable"])
@pytest.mark.parametrize("failing", [1, 2], ids=["first-fails", "second-fails"])
def test_one_fencing_fails_and_the_other_goes_on(
    failing: int, spoil: Spoil, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    other = 3 - failing
    c, due = two_expire_together(failing)
    clean, _ = two_expire_together(failing)
    image_before = c.shard.image.snapshot()
    calls = fail_expiry(c, failing, spoil, monkeypatch)

    # The clean cluster: only the other node's session runs out at ``due``.
    clean.now = due - 1
    clean.heartbeat(failing)
    clean.now = due
    expected = clean.tick()

    c.now = due
    with caplog.at_level(logging.ERROR):
        result = c.tick()
    assert calls[0] == 1
    # The other node is fenced in the same result, exactly as if the failure never was.
    assert result.records == expected.records
    assert NodeKey(other) in c.record_keys(result)
    assert NodeKey(failing) not in c.record_keys(result)
    assert all(r.raw is not None for r in result.records)
    assert c.shard.image.node(other).fenced  # type: ignore[union-attr]
    assert not c.shard.image.node(failing).fenced  # type: ignore[union-attr]
    assert c.shard.image.snapshot() == clean.shard.image.snapshot() != image_before
    assert soft_state(c) == soft_state(clean)
    # The failed one is retried in 100 ms, and nothing else of it is left.
    assert c.shard.timers.deadline(session_timer(failing)) == due + 100
    assert isr_shrink_timer(failing) not in c.shard.timers
    assert c.shard.retries.failures(session_timer(failing)) == 1
    assert any("failed; retrying in 100 ms" in r.getMessage() for r in caplog.records)
    c.check()


@pytest.mark.parametrize("spoil", [throw, poison], ids=["throws", "unencodable"])
def test_a_timer_that_keeps_failing_backs_off_then_is_dropped(
    spoil: Spoil, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c, due = two_expire_together(1)
    key = session_timer(1)
    calls = fail_expiry(c, 1, spoil, monkeypatch)
    c.now = due
    c.tick()
    assert calls[0] == 1
    at = due + 100
    for attempt, backoff in enumerate(BACKOFFS[1:], start=2):
        assert c.shard.timers.deadline(key) == at
        image, soft = c.shard.image.snapshot(), soft_state(c)
        c.now = at - 1
        assert c.tick().records == [] and calls[0] == attempt - 1  # not due yet
        c.now = at
        assert c.tick().records == []
        assert calls[0] == attempt
        assert (c.shard.image.snapshot(), soft_state(c)) == (image, soft)
        at += backoff
    assert c.shard.timers.deadline(key) == at
    logged = len(caplog.records)
    with caplog.at_level(logging.ERROR):
        c.now = at
        assert c.tick().records == []
    assert calls[0] == 5
    assert key not in c.shard.timers
    assert c.shard.retries.failures(key) == 0
    assert any("dropped" in r.getMessage() for r in caplog.records[logged:])
    assert not c.shard.image.node(1).fenced  # type: ignore[union-attr]
    c.run_for(60_000, [3, 4])
    assert calls[0] == 5

    # Nothing else is broken: the controller serves, and node 1's next heartbeat gives it
    # a session again, which expires as usual once the failure is gone.
    c.heartbeat_all([1, 3, 4])
    c.create("v", 2, 2)
    assert c.shard.image.topic("v") is not None
    assert c.shard.timers.deadline(key) == c.now + c.config.node_session_timeout_ms
    monkeypatch.undo()
    c.now += c.config.node_session_timeout_ms - 1
    c.heartbeat_all([3, 4])
    c.tick(1)
    assert c.shard.image.node(1).fenced  # type: ignore[union-attr]
    c.check()


def test_a_success_clears_the_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    c, due = two_expire_together(1)
    calls = fail_expiry(c, 1, throw, monkeypatch)
    c.now = due
    c.tick()
    c.tick(100)
    assert calls[0] == 2 and c.shard.retries.failures(session_timer(1)) == 2
    monkeypatch.undo()
    c.tick(200)
    assert c.shard.image.node(1).fenced  # type: ignore[union-attr]
    assert c.shard.retries.failures(session_timer(1)) == 0


# -- requests -----------------------------------------------------------------------------------


def test_a_request_whose_records_cannot_be_encoded_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c, clean = Cluster(), Cluster()
    for x in (c, clean):
        x.add_nodes([1, 2, 3])
        x.create("t", assignment={0: [1, 2, 3]})
    shard = c.shard
    before = (shard.replica_states.explicit(), shard.timers.snapshot(), shard.rng.getstate(),
              shard.image.snapshot(), len(c.log))  # fmt: skip
    original = shard._handlers["CreateTopic"]
    calls = [0]

    def create(batch: Batch, body: Any) -> Any:
        calls[0] += 1
        reply = original(batch, body)
        assert batch.records, "the topic was not created"
        bad = part("t", 0, (1, 2, 3), leader=1, epoch=2**31)
        batch.records.append(Record(PartitionKey("t", 0), bad))
        return reply

    body = api.CreateTopic(name="new", num_partitions=6, replication_factor=2)
    with monkeypatch.context() as patch:
        patch.setitem(shard._handlers, "CreateTopic", create)
        with caplog.at_level(logging.ERROR):
            message = c.fails(body, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert calls[0] == 1
    assert "CreateTopic" in message
    after = (shard.replica_states.explicit(), shard.timers.snapshot(), shard.rng.getstate(),
             shard.image.snapshot(), len(c.log))  # fmt: skip
    assert after == before
    assert shard.image.topic("new") is None
    assert any(r.exc_info is not None and r.exc_info[0] is CodecError for r in caplog.records), (
        "the encoding failure was not logged"
    )
    # The same request then succeeds exactly as on a controller that never failed (the
    # placement rng was put back).
    assert c.ok(body, retry=True) == clean.ok(body)
    assert c.shard.image.snapshot() == clean.shard.image.snapshot()
    assert c.log[-len(clean.last.records) :] == clean.last.records


def test_a_heartbeat_whose_records_cannot_be_encoded_keeps_the_node_fenced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = Cluster()
    c.add_nodes([1, 2])
    c.create("t", assignment={0: [1, 2]})
    c.ok(api.FenceNode(node_id=1))
    shard = c.shard
    timers, image = shard.timers.snapshot(), shard.image.snapshot()
    assert session_timer(1) not in shard.timers
    original = shard.internal_topics.ensure

    def ensure(batch: Batch) -> None:
        original(batch)
        batch.records.append(Record(PartitionKey("t", 0), part("t", 0, epoch=2**31)))

    with monkeypatch.context() as patch:
        patch.setattr(shard.internal_topics, "ensure", ensure)
        reply = c.call(api.NodeHeartbeat(node_id=1, node_epoch=c.node_epochs[1]))
    assert reply.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert c.last.records == []
    assert shard.timers.snapshot() == timers  # no session started
    assert shard.image.snapshot() == image
    assert shard.image.node(1).fenced  # type: ignore[union-attr]
    c.heartbeat(1)
    assert not shard.image.node(1).fenced  # type: ignore[union-attr]
    assert session_timer(1) in shard.timers


def test_a_rebalance_record_reaches_the_rollback() -> None:
    """RebalanceValue records written before a mark survive a rollback; the key type
    is what the log holds."""
    image = small_image()
    batch = Batch(image, 0, 5)
    batch.put_rebalance(rebalance("kept"))
    mark = batch.mark()
    batch.put_rebalance(rebalance("undone"))
    batch.rollback(mark)
    assert batch.rebalance() == rebalance("kept")
    assert [type(r.key) for r in batch.records] == [RebalanceKey]
