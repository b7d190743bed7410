"""The daemon's lag sampler, shared by the console's pages and the lag metrics.

The metrics export only the groups whose shard this daemon leads, so each group is
exported by one daemon. With the console off, only those groups are sampled at all.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkacoord.console.lag import LagHistory
from kafkacoord.console.sampler import LagSampler
from kafkacoord.coordinator.groups.partitioning import partition_for

from .ops.lag_metrics import LagCollector, LagSnapshot, lag_snapshot
from .settings import Settings

__all__ = ["LagService"]


class LagService:
    def __init__(
        self, settings: Settings, collector: LagCollector, leads_shard: Callable[[int], bool]
    ) -> None:
        self.settings = settings
        self.collector = collector
        self._leads_shard = leads_shard
        self._sampler: LagSampler | None = None

    def leads(self, group: str) -> bool:
        """This daemon leads the group's shard."""
        return self._leads_shard(partition_for(group, self.settings.offsets_partitions))

    def start(self, bootstrap: str) -> LagHistory:
        """Sample every ``console_lag_interval_ms``; the history the samples go to."""
        self.close()
        s = self.settings
        history = LagHistory(s.console_lag_samples, allowed_lag=s.allowed_lag)
        self._sampler = LagSampler(
            bootstrap, s.topics, history, offsets_partitions=s.offsets_partitions,
            tls=s.client_tls(), client_id=f"kafkacoord-{s.node_id}-lag",
            interval_s=s.console_lag_interval_ms / 1000,
            keep=None if s.console else self.leads, on_sample=self._publish,
        ).start()  # fmt: skip
        return history

    def _publish(self, history: LagHistory) -> None:
        led = [group for group in history.groups() if self.leads(group)]
        self.collector.update(lag_snapshot(history, led, self.settings.lag_metrics_max_partitions))

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        self.collector.update(LagSnapshot())  # not sampled: nothing to say
