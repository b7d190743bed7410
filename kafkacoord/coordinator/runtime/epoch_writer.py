"""Pipelined appends for a group shard, fenced by the shard's leader epoch.

Kafka's own coordinator appends offset commits with plain ``acks=all`` writes and
relies on leader epochs to fence a deposed leader. This writer does the same on
top of any Kafka-compatible broker:

- Opening it appends a ``ShardLeader`` record with the leader epoch the controller
  gave this daemon; every later record carries that epoch in a header. Readers
  ignore records of a lower epoch that follow a newer ``ShardLeader``
  (:mod:`kafkacoord.storage.fencing`).
- Batches are pipelined on one idempotent producer session, so the broker keeps
  them in order with no gaps or duplicates, and a batch completes without waiting
  for the ones after it. All the shards of a daemon share that session
  (:class:`SharedProducer`), so their appends travel in the same requests.
- Before a batch is reported durable, the writer checks that nobody else wrote
  between its previous record and this batch. Only this daemon writes to the
  partition while it leads, so offsets are consecutive; a gap is read back, and
  if it holds a newer ``ShardLeader`` this process is a zombie: the batch is
  reported as fenced, never as durable, so no caller is told that a write which
  every reader ignores succeeded. The read-back runs on a thread of its own, with
  this writer's later batches waiting behind it: the shared session's event loop
  (in the daemon, the listener's) goes on reporting the other shards' batches.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import cast

import structlog
from confluent_kafka import TopicPartition

from kafkacoord.storage.batch_producer import IoLoop, ProducerSession
from kafkacoord.storage.clients import replay_consumer
from kafkacoord.storage.errors import AppendError
from kafkacoord.storage.fencing import epoch_headers, marker_epoch
from kafkacoord.storage.produce_wire import Header
from kafkacoord.threads import spawn

from .shard import RawRecord
from .writer import Delivered, WriterFencedError

log = structlog.get_logger(__name__)


class SharedProducer:
    """One batch producer session and its I/O thread, for many writers.

    The processor submits the appends of every shard of a turn together
    (:mod:`.turn`); the session sends every partition's batch that waits for a broker
    in one produce request, and reports each batch once
    (:mod:`kafkacoord.storage.batch_producer`). A session with a failed partition
    takes no new writers: the next writer opened (a shard reloading after the
    failure) gets a new session, with a new producer id. The old one closes its
    connections once what it has in flight is answered.
    """

    def __init__(
        self, bootstrap: str, client_id: str, *, timeout_s: float = 30.0, io: IoLoop | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        # A loop of its own unless given one: the daemon gives the listener's, see README.
        self._io = io or IoLoop(f"{client_id}-io")
        self._session: ProducerSession | None = None
        self._retired: list[ProducerSession] = []

    def producer(self) -> ProducerSession:
        """The session for a new writer: a new one if the last one failed."""
        with self._lock:
            self._retired = [old for old in self._retired if not old.retired]
            session = self._session
            if session is None or not session.healthy:
                if session is not None:
                    session.retire()
                    self._retired.append(session)
                session = self._session = ProducerSession(
                    self._io, self.bootstrap, self.client_id, timeout_s=self.timeout_s
                )
            return session

    def close(self) -> None:
        with self._lock:
            sessions = [*self._retired, *([self._session] if self._session else [])]
            self._session, self._retired = None, []
        for session in sessions:
            session.close()
        self._io.close()


# A batch's outcome as the session reports it: record count, callback, base offset, error.
_Outcome = tuple[int, Delivered, int, AppendError | None]


class LeaderEpochWriter:
    """A group shard's pipelined writer: announces its leader epoch with a ``ShardLeader``
    record on open and tags every record with it, so readers drop a deposed leader's writes."""

    def __init__(
        self,
        shared: SharedProducer,
        topic: str,
        partition: int,
        *,
        epoch: int,
        marker: RawRecord,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.epoch = epoch
        self._shared = shared
        self._session = shared.producer()
        self._session.prepare(topic, partition)
        self._timeout_s = shared.timeout_s
        self._headers = cast(list[Header], epoch_headers(epoch))
        self._next_offset: int | None = None  # after our last record; None until the marker
        self._failure: AppendError | None = None  # sticky: later batches fail too
        self._outstanding = 0
        self._idle = threading.Condition()
        # Batches reported while a gap is read back wait here, in order (see _complete).
        self._behind: deque[_Outcome] | None = None
        self._behind_lock = threading.Lock()
        try:
            offsets = self.write([marker])
        except AppendError:
            self.close()
            raise
        log.debug("shard leader epoch written", topic=topic, partition=partition, epoch=epoch,
                 offset=offsets[0])  # fmt: skip

    # -- appends ---------------------------------------------------------------------

    def submit(self, records: Sequence[RawRecord], done: Delivered) -> None:
        """Append without waiting; ``done`` runs in batch order, on the session's event
        loop (or, after a gap, on the thread that reads the gap back)."""
        if not records:
            done([], None)
            return
        if self._failure is not None:  # fenced or broken: append nothing more
            done([], self._failure)
            return
        with self._idle:
            self._outstanding += 1
        self._session.append(
            self.topic, self.partition, records, self._headers,
            functools.partial(self._complete, len(records), done),
        )  # fmt: skip

    def write(self, records: Sequence[RawRecord]) -> list[int]:
        if self._session.on_io_thread():
            raise RuntimeError("a writer cannot wait for its append on its producer's thread")
        finished = threading.Event()
        outcome: list[tuple[list[int], AppendError | None]] = []

        def done(offsets: list[int], error: AppendError | None) -> None:
            outcome.append((offsets, error))
            finished.set()

        self.submit(records, done)
        if not finished.wait(self._timeout_s + 5):
            raise AppendError(f"append to {self.topic}-{self.partition} timed out", retriable=True)
        offsets, error = outcome[0]
        if error is not None:
            raise error
        return offsets

    def close(self) -> None:
        """Wait (briefly) for this writer's batches; the shared producer stays open."""
        if self._session.on_io_thread():
            return  # they are reported on this very thread: waiting would only stall it
        with self._idle:
            self._idle.wait_for(lambda: self._outstanding == 0, timeout=5)

    # -- outcomes, on the session's event loop -----------------------------------------

    def _complete(self, count: int, done: Delivered, base: int, error: AppendError | None) -> None:
        """A batch's outcome, on the session's event loop, which every shard shares. A
        batch after a gap goes to a thread of its own to be read back, and this
        writer's later batches queue behind it to keep their order."""
        outcome = (count, done, base, error)
        with self._behind_lock:
            if self._behind is None and not self._after_gap(base, error):
                behind = None
            else:
                start = self._behind is None
                behind = self._behind = self._behind or deque()
                behind.append(outcome)
        if behind is None:
            self._settle(*outcome)
        elif start:
            spawn(f"{self.topic}-{self.partition}-gap", self._catch_up)

    def _after_gap(self, base: int, error: AppendError | None) -> bool:
        """Whether settling this batch would read a gap back (see _check_consecutive)."""
        return self._failure is None and error is None and self._follows_gap(base)

    def _follows_gap(self, base: int) -> bool:
        # A batch's offsets are consecutive: only its first can follow a gap.
        return self._next_offset is not None and base != self._next_offset

    def _catch_up(self) -> None:
        while True:
            with self._behind_lock:
                if not self._behind:
                    self._behind = None
                    return
                outcome = self._behind.popleft()
            self._settle(*outcome)

    def _settle(self, count: int, done: Delivered, base: int, error: AppendError | None) -> None:
        if self._failure is None and error is not None:
            self._failure = error
        offsets = list(range(base, base + count))
        if self._failure is None:
            try:
                self._check_consecutive(offsets)
            except AppendError as exc:
                self._failure = exc
        if self._failure is not None:
            done([], self._failure)
        else:
            done(offsets, None)
        with self._idle:
            self._outstanding -= 1
            self._idle.notify_all()

    def _check_consecutive(self, offsets: list[int]) -> None:
        if self._next_offset is not None and self._follows_gap(offsets[0]):
            self._inspect_gap(self._next_offset, offsets[0])
        self._next_offset = offsets[-1] + 1

    def _inspect_gap(self, start: int, end: int) -> None:
        """Someone else appended in [start, end): fenced if it holds a newer leader."""
        if end < start:
            raise AppendError(
                f"{self.topic}-{self.partition}: offset {end} went backwards from {start}; "
                "the partition was recreated", retriable=True,
            )  # fmt: skip
        newest = self._newest_leader_epoch(start, end)
        if newest is not None and newest > self.epoch:
            raise WriterFencedError(
                f"{self.topic}-{self.partition}: leader epoch {newest} took over from "
                f"{self.epoch}", retriable=False, fatal=True,
            )  # fmt: skip
        log.warning("foreign records between appends", topic=self.topic,
                    partition=self.partition, start=start, end=end)  # fmt: skip

    def _newest_leader_epoch(self, start: int, end: int) -> int | None:
        consumer = replay_consumer(self._shared.bootstrap, f"{self._shared.client_id}-gap")
        try:
            consumer.assign([TopicPartition(self.topic, self.partition, start)])
            newest: int | None = None
            deadline = time.monotonic() + self._timeout_s
            position = start
            while position < end:
                if time.monotonic() > deadline:
                    raise AppendError(
                        f"{self.topic}-{self.partition}: could not read back offsets "
                        f"{start}..{end - 1}", retriable=True,
                    )  # fmt: skip
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                position = cast(int, msg.offset()) + 1
                if position > end:
                    break
                announced = marker_epoch(msg.key(), msg.value())
                if announced is not None:
                    newest = announced if newest is None else max(newest, announced)
            return newest
        finally:
            consumer.close()


__all__ = ["LeaderEpochWriter", "SharedProducer"]
