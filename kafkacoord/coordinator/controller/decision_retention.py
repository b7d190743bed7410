"""Decision records do not pile up in the compacted metadata topic: the controller
tombstones those older than ``decision_retention_ms``, a few at a time, on a timer
(docs/architecture.md#causes). The image keeps each live decision's time for this."""

from __future__ import annotations

from typing import Final

from kafkacoord.codecs.models import DecisionKey

from .batch import Batch

__all__ = ["RETENTION_INTERVAL_MS", "RETENTION_TIMER", "expire_decisions"]

RETENTION_TIMER: Final = "decision_retention"
RETENTION_INTERVAL_MS: Final = 60_000
# Tombstones per run: a run is one handler turn, kept short.
RETENTION_BATCH: Final = 1000


def expire_decisions(batch: Batch, retention_ms: int, limit: int = RETENTION_BATCH) -> bool:
    """Tombstone up to ``limit`` decisions decided before ``retention_ms`` ago, oldest
    first (the image holds them in log order); ``True`` when some are left for later."""
    horizon = batch.now_ms - retention_ms
    expired = 0
    for decision, decided_ms in batch.image.decisions.items():
        if decided_ms >= horizon:
            continue  # a later decision may still be older: a new controller's clock
        if expired == limit:
            return True
        batch.delete_decision(DecisionKey(*decision))
        expired += 1
    return False
