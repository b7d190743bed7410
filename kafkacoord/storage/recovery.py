"""Bring cached shards up to the high watermark of their partitions.

For each shard: start from its checkpoint, or rebuild from the log start when
the topic was recreated, the log is behind the checkpoint, or the checkpoint is
older than ``delete.retention.ms`` (compaction may have dropped tombstones the
cache never saw). Each chunk's changes and the new checkpoint are written in
one atomic batch, so a crash at any point leaves a consistent prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafkacoord.codecs import decode_value
from kafkacoord.codecs.models import AvroModel, ControllerKey, ControllerValue, ShardLeaderKey
from kafkacoord.codecs.records import RecordType, encode_key

from .cache import ShardId, StateCache
from .clients import PATIENT_FETCH_WAITS_MS
from .errors import BrokerUnavailableError, LoadCancelledError, TopicIdentityChangedError
from .fencing import marker_epoch
from .fold import ChunkFolder, FoldPolicy, FoldStats
from .reader import (
    BEGINNING,
    REFETCH_AFTER_S,
    STALL_TIMEOUT_S,
    LogBehindCheckpointError,
    PartitionReader,
    ReadStalledError,
)
from .topics import KAFKA_DELETE_RETENTION_MS

log = structlog.get_logger(__name__)

DEFAULT_DELETE_RETENTION_MS = KAFKA_DELETE_RETENTION_MS


@dataclass(slots=True)
class ShardLoad:
    """What one recovery did to one shard."""

    shard: ShardId
    start_offset: int
    next_offset: int = 0
    high_watermark: int | None = None
    rebuilt: str | None = None
    stats: FoldStats = field(default_factory=FoldStats)
    seconds: float = 0.0
    # Where the seconds went: reading the log, folding it, writing the cache.
    phases: dict[str, float] = field(default_factory=dict)
    # The shard's whole state, decoded (raw key -> key, value), when the load started
    # from an empty cache: the owner replays it without reading and decoding the cache.
    decoded: dict[bytes, tuple[AvroModel, AvroModel]] | None = None

    @property
    def resume_offset(self) -> int:
        """Where reading continues: past what was applied, else the planned start."""
        return self.next_offset if self.next_offset > 0 else self.start_offset


@dataclass(slots=True)
class ShardTail:
    """A shard kept loaded between passes (a standby): its load so far and the folder that
    folded it, whose fences and decoded state the next pass continues."""

    load: ShardLoad
    folder: ChunkFolder


class _Wedged:
    """Bounds reading again after stalls: a new consumer that gets no further either, for
    as long as the reader's own stall timeout, means the broker is not serving."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._since: float | None = None
        self._positions: dict[int, int] = {}

    def check(self, stalled: ReadStalledError) -> None:
        now = time.monotonic()
        positions = {p: at for p, (at, _) in stalled.positions.items()}
        moved = any(at > self._positions.get(p, -1) for p, at in positions.items())
        if self._since is None or moved:
            self._since, self._positions = now, positions
        elif now - self._since > self._timeout_s:
            raise BrokerUnavailableError(
                f"{stalled}, and new consumers got no further for {self._timeout_s}s"
            ) from stalled


class ConsumerFactory(Protocol):
    """Makes the replay consumer; ``fetch_wait_ms`` (when given) replaces its fetch wait."""

    def __call__(self, *, fetch_wait_ms: int | None = None) -> Consumer: ...


def _add_phases(phases: dict[str, float], **seconds: float) -> None:
    for name, value in seconds.items():
        phases[name] = phases.get(name, 0.0) + value


class ShardRecovery:
    """Loads the shards of one topic into the cache (quix-streams' Recovery, for Kafka logs)."""

    def __init__(
        self,
        cache: StateCache,
        consumer_factory: ConsumerFactory,
        topic: str,
        policy: FoldPolicy,
        *,
        strict: bool | None = None,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
        chunk_records: int = 200_000,
        progress_interval_s: float = 2.0,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        identity_probe: Callable[[], str | None] | None = None,
        refetch_after_s: float = REFETCH_AFTER_S,
        stall_timeout_s: float = STALL_TIMEOUT_S,
    ) -> None:
        self._cache = cache
        # The topic's id as the broker reports it now (None: gone); checked around each load.
        self._identity_probe = identity_probe
        self._consumer_factory = consumer_factory
        self.topic = topic
        self._policy = policy
        self._strict = strict
        self._delete_retention_ms = delete_retention_ms
        self._chunk_records = chunk_records
        self._progress_interval_s = progress_interval_s
        self._clock_ms = clock_ms
        self._refetch_after_s = refetch_after_s
        self._stall_timeout_s = stall_timeout_s

    def recover(self, partitions: Iterable[int], identity: str) -> dict[int, ShardLoad]:
        """Replay ``partitions`` up to their high watermarks; ``identity`` is the topic id."""
        self._verify_identity(identity)
        loads = {p: self._plan(ShardId(self.topic, p), identity) for p in partitions}
        self._load(loads, {}, identity)
        # The broker may have been replaced during the load: then the loads mix two lives.
        self._verify_identity(identity)
        return loads

    def follow(
        self,
        partition: int,
        identity: str,
        tail: ShardTail | None = None,
        *,
        cancel: Callable[[], bool] | None = None,
    ) -> ShardTail:
        """Bring one shard to its high watermark, continuing ``tail`` (an earlier pass)
        where it stood. A standby calls this over and over; the pass that takes the shard
        over then reads only what the log gained since the one before.

        A tail that started from an empty cache keeps its decoded state across passes, so
        each pass hands over the whole state (``load.decoded``) as a single load would.
        The load's seconds, phases and stats are the last pass's. ``cancel`` is asked
        between chunks; once it says yes the pass stops with LoadCancelledError, and the
        cache holds a consistent prefix (the tail is then void).
        """
        self._verify_identity(identity)
        if tail is None:
            load = self._plan(ShardId(self.topic, partition), identity)
            folders: dict[int, ChunkFolder] = {}
        else:
            load, folders = tail.load, {partition: tail.folder}
            load.high_watermark, load.seconds, load.phases = None, 0.0, {}
            load.stats = FoldStats()
        loads = {partition: load}
        self._load(loads, folders, identity, cancel)
        self._verify_identity(identity)
        load = loads[partition]  # a rebuild replaces it
        return ShardTail(load, folders.get(partition) or self._folder(load))

    def _load(
        self,
        loads: dict[int, ShardLoad],
        folders: dict[int, ChunkFolder],
        identity: str,
        cancel: Callable[[], bool] | None = None,
    ) -> None:
        """Read ``loads`` to their high watermarks, continuing ``folders`` (and adding the
        missing ones). A shard whose log is behind its checkpoint starts over."""
        consumer = self._consumer_factory()
        wedged, restarts = _Wedged(self._stall_timeout_s), 0
        try:
            pending = self._without_empty(consumer, loads, identity)
            while pending:
                try:
                    self._replay(consumer, pending, identity, folders, cancel)
                    pending = {}
                except ReadStalledError as stalled:
                    # A new consumer with a longer fetch wait reads on (see
                    # PATIENT_FETCH_WAITS_MS); what was read and not yet folded is read again.
                    if cancel is not None and cancel():
                        raise LoadCancelledError(f"load of {self.topic} cancelled") from stalled
                    wedged.check(stalled)
                    wait_ms = PATIENT_FETCH_WAITS_MS[min(restarts, len(PATIENT_FETCH_WAITS_MS) - 1)]
                    restarts += 1
                    log.warning("read stalled; reading on a new consumer", topic=self.topic,
                                fetch_wait_ms=wait_ms, error=str(stalled))  # fmt: skip
                    consumer.close()
                    consumer = self._consumer_factory(fetch_wait_ms=wait_ms)
                    pending = {p: ld for p, ld in loads.items() if ld.high_watermark is None}
                except LogBehindCheckpointError as behind:
                    # Only the partitions named restart, from the log start.
                    for partition, high in behind.partitions.items():
                        load = loads[partition]
                        log.warning("log is behind checkpoint; rebuilding", shard=str(load.shard),
                                    checkpoint=load.next_offset, log_end=high)  # fmt: skip
                        self._cache.shard(load.shard).clear()
                        loads[partition] = ShardLoad(
                            load.shard, BEGINNING, rebuilt="log behind checkpoint"
                        )
                        folders.pop(partition, None)  # its fences and decoded state are void
                    pending = {p: ld for p, ld in loads.items() if ld.high_watermark is None}
        finally:
            consumer.close()

    def _without_empty(
        self, consumer: Consumer, loads: dict[int, ShardLoad], identity: str
    ) -> dict[int, ShardLoad]:
        """Finish at once the shards read from the start of an empty log.

        Reading an empty partition to EOF costs a parked fetch (about 0.6 s for 50 shards
        on the embedded broker), which is most of a fresh start. A listed end of 0 is
        exact on every broker: the embedded broker's ListOffsets may undercount, but any
        batch makes it at least 1.
        """
        fresh = [p for p, load in loads.items() if load.resume_offset in (BEGINNING, 0)]
        pending = dict(loads)
        for partition in fresh:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=5, cached=False
                )
            except KafkaException:
                continue  # the replay finds out the slow way
            if high != 0:
                continue
            load = pending.pop(partition)
            self._cache.shard(load.shard).apply(
                {}, next_offset=0, identity=identity, now_ms=self._clock_ms()
            )  # fmt: skip
            load.next_offset, load.high_watermark = 0, 0
            load.decoded = {}
        return pending

    def _verify_identity(self, identity: str) -> None:
        if self._identity_probe is None:
            return
        current = self._identity_probe()
        if current != identity:
            raise TopicIdentityChangedError(self.topic, identity, current)

    def _plan(self, shard: ShardId, identity: str) -> ShardLoad:
        store = self._cache.shard(shard)
        checkpoint = store.checkpoint()
        if checkpoint is None:
            store.clear()  # nothing, or a shard of another cache format: the log decides
            return ShardLoad(shard, BEGINNING)
        reason = None
        if checkpoint.identity != identity:
            reason = "topic recreated (new identity)"
        elif self._clock_ms() - checkpoint.written_ms > self._delete_retention_ms:
            reason = "checkpoint older than delete.retention.ms"
        if reason is None:
            return ShardLoad(shard, checkpoint.next_offset, next_offset=checkpoint.next_offset)
        log.info("rebuilding shard", shard=str(shard), reason=reason)
        store.clear()
        return ShardLoad(shard, BEGINNING, rebuilt=reason)

    def _controller_epoch(self, shard: ShardId) -> int:
        """The fence to resume with: the newest controller epoch already in the cache."""
        if not self._policy.fenced_by_controller_epoch:
            return -1
        raw = self._cache.shard(shard).get(encode_key(ControllerKey()))
        if raw is None:
            return -1
        value = decode_value(RecordType.CONTROLLER, raw)
        assert isinstance(value, ControllerValue)
        return value.epoch

    def _leader_epoch(self, shard: ShardId) -> int:
        """The leader-epoch fence to resume with: the last ``ShardLeader`` in the cache."""
        if not self._policy.fenced_by_leader_epoch:
            return -1
        key = encode_key(ShardLeaderKey())
        epoch = marker_epoch(key, self._cache.shard(shard).get(key))
        return -1 if epoch is None else epoch

    def _folder(self, load: ShardLoad) -> ChunkFolder:
        return ChunkFolder(
            self.topic, self._policy, strict=self._strict,
            controller_epoch=self._controller_epoch(load.shard),
            leader_epoch=self._leader_epoch(load.shard),
            keep_decoded=load.start_offset == BEGINNING,  # the cache started empty
        )  # fmt: skip

    def _replay(
        self,
        consumer: Consumer,
        loads: dict[int, ShardLoad],
        identity: str,
        folders: dict[int, ChunkFolder],
        cancel: Callable[[], bool] | None = None,
    ) -> None:
        """Fold ``loads`` to their ends. A partition keeps its folder in ``folders`` across
        a restart of the others (its decoded state spans both) and across passes."""
        for p, load in loads.items():
            if p not in folders:
                folders[p] = self._folder(load)
        reader = PartitionReader(
            consumer,
            self.topic,
            {p: load.resume_offset for p, load in loads.items()},
            chunk_records=self._chunk_records,
            refetch_after_s=self._refetch_after_s,
            stall_timeout_s=self._stall_timeout_s,
        )
        started = time.monotonic()
        next_report = started + self._progress_interval_s
        mark = started
        for chunk in reader.chunks():
            if cancel is not None and cancel():
                raise LoadCancelledError(f"load of {self.topic} cancelled")
            load = loads[chunk.partition]
            folded = written = now = time.monotonic()
            # At the end the checkpoint is rewritten even with no records: its time
            # says when the cache last saw the whole log (the delete.retention rule).
            if chunk.messages or chunk.at_end:
                changes, stats = folders[chunk.partition].fold(chunk.partition, chunk.messages)
                folded = time.monotonic()
                self._cache.shard(load.shard).apply(
                    changes,
                    next_offset=chunk.next_offset,
                    identity=identity,
                    now_ms=self._clock_ms(),
                )
                load.stats.add(stats)
                written = time.monotonic()
            _add_phases(load.phases, read=now - mark, fold=folded - now, cache=written - folded)
            mark = written
            load.next_offset = chunk.next_offset
            if chunk.at_end:
                load.high_watermark = chunk.high_watermark
                load.seconds = time.monotonic() - started
                load.decoded = folders[chunk.partition].decoded
            now = time.monotonic()
            if now >= next_report:
                next_report = now + self._progress_interval_s
                self._report(loads, now - started)

    def _report(self, loads: dict[int, ShardLoad], elapsed: float) -> None:
        records = sum(load.stats.records for load in loads.values())
        done = sum(1 for load in loads.values() if load.high_watermark is not None)
        log.info("loading", topic=self.topic, shards_done=f"{done}/{len(loads)}", records=records,
                 rate=round(records / max(elapsed, 1e-9)))  # fmt: skip
