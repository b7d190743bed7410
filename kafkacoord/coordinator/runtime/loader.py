"""Loading a shard host's shard: open its writer, recover, replay, activate.

Opening the writer comes first: it fences any older writer (a zombie controller's
transactional id, a deposed leader's epoch), so the log read next is final. The
recovery (:mod:`kafkacoord.storage.recovery`) hands over the shard's records, decoded
from the log or read back from the RocksDB cache; they are replayed into a new shard in
an order its fences keep them all. Activation appends what ``on_loaded`` writes and
waits until it is answered. A load runs off the processor, on a thread of its own; a
reload (after a failed append, or a reset) is the same load.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.fencing import controller_epoch_of
from kafkacoord.codecs.models import AvroModel
from kafkacoord.gc_pause import freeze_long_lived, gc_paused, thaw
from kafkacoord.storage.cache import ShardStore
from kafkacoord.storage.errors import LoadCancelledError

from .appends import AppendPipeline
from .guards import apply_result
from .host_parts import HostParts, HostStats
from .observer import HostObserver
from .shard import Record, Shard

log = structlog.get_logger(__name__)


def replay_order(record: Record) -> int:
    """Cache contents replay in controller-epoch order, so epoch fencing keeps them all."""
    return controller_epoch_of(record.value)


def in_log_order(decoded: dict[bytes, tuple[AvroModel, AvroModel]]) -> list[Record]:
    """Decoded records as an in-order fold keeps them (the log order of each key's last
    record): the fence admits them all in this order, so they need no sorting."""
    return [Record(key, value) for key, value in decoded.values()]


def by_record_type(decoded: dict[bytes, tuple[AvroModel, AvroModel]]) -> list[Record]:
    """Decoded records in the cache's order of record types (the type tag leads every key),
    as a replay of the cache would see them; within a type, in log order."""
    by_type: dict[int, list[Record]] = {}
    for raw_key, (key, value) in decoded.items():
        by_type.setdefault(raw_key[0], []).append(Record(key, value))
    return [record for tag in sorted(by_type) for record in by_type[tag]]


def decode_cached(store: ShardStore, shard: str) -> list[Record]:
    """The cache's records of one shard, decoded; one that no longer decodes is skipped."""
    records: list[Record] = []
    for raw_key, raw_value in store.items():
        try:
            key, value = decode_record(raw_key, raw_value)
        except CodecError as exc:  # the cache holds only values that decoded once
            log.warning("undecodable cached record", shard=shard, error=str(exc))
            continue
        records.append(Record(key, value))
    return records


class ShardLoader:
    """Loads one host's shard and activates it, counting into the host's stats."""

    def __init__(
        self,
        name: str,
        *,
        appends: AppendPipeline,
        stats: HostStats,
        observer: HostObserver,
        clock_ms: Callable[[], int],
        flush_timeout_s: float,
    ) -> None:
        self.name = name
        self._appends = appends
        self._stats = stats
        self._observer = observer
        self._clock_ms = clock_ms
        self._flush_timeout_s = flush_timeout_s

    def load(
        self,
        parts: HostParts,
        replayed: Callable[[Shard], None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """Load the shard anew; ``replayed`` takes it before it is activated.

        An append of the activation that fails loads it again, as a failed append of a
        serving shard does, unless the host is ``stopping`` (LoadCancelledError); a
        fenced writer, or any other failure, is raised.
        """
        thaw()  # a reload drops the shard's old state: let the collector see it again
        with gc_paused():  # a load allocates the whole state at once
            while not self._load_paused(parts, replayed):
                self._appends.reload_needed = False
                if stopping():  # a new writer would fence whoever holds the shard now
                    raise LoadCancelledError(f"{self.name}: stopped while loading")
            # Before the collector is back: its first run would walk all the new state.
            freeze_long_lived()

    def _load_paused(self, parts: HostParts, replayed: Callable[[Shard], None]) -> bool:
        """One load; False if an append of its activation failed."""
        self._appends.writer = parts.make_writer()
        started = time.monotonic()
        load = parts.recover()
        recovered = time.monotonic()
        shard = parts.make_shard()
        fenced = parts.policy.fenced_by_controller_epoch
        if load.decoded is not None:
            records = (in_log_order if fenced else by_record_type)(load.decoded)
            load.decoded = None
        else:
            records = decode_cached(parts.store, self.name)
            if fenced:
                records.sort(key=replay_order)
        replaying = time.monotonic()
        for record in records:
            shard.replay(record)
        replayed(shard)
        stats = self._stats
        stats.loads += 1
        stats.records_loaded = len(records)
        stats.log_records_read = load.stats.records
        activating = time.monotonic()
        self._appends.add(apply_result(shard, shard.on_loaded(self._clock_ms())))
        self._appends.flush(self._flush_timeout_s)
        if self._appends.reload_needed:
            return False
        done = time.monotonic()
        stats.load_seconds = done - started
        stats.load_phases = {
            **load.phases, "order": replaying - recovered, "replay": activating - replaying,
            "activate": done - activating,
        }  # fmt: skip
        self._observer.loaded(self.name, stats.load_seconds, len(records))
        # Per shard at debug: a daemon activates dozens at once; its owner sums them up.
        log.debug("shard active", shard=self.name, keys=len(records),
                  log_records=load.stats.records, rebuilt=load.rebuilt,
                  seconds=round(stats.load_seconds, 3),
                  phases={k: round(v, 3) for k, v in stats.load_phases.items()})  # fmt: skip
        return True


__all__ = ["ShardLoader", "by_record_type", "decode_cached", "in_log_order", "replay_order"]
