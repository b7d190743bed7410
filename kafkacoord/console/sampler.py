"""The lag sampler: every group's committed offsets and their log end offsets, on a timer.

One thread records them into a :class:`~.lag.LagHistory`, which the console's pages and
the daemon's lag metrics both read. It runs with the console off too (the metrics need
it), so it owns clients of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from kafkacoord.client.errors import RequestError
from kafkacoord.client.group_admin import GroupAdmin
from kafkacoord.storage.errors import StorageError
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.storage.watermarks import EndOffsetProbe
from kafkacoord.wire import ClientTls

from .lag import LagHistory

log = structlog.get_logger(__name__)

__all__ = ["LagSampler"]


class LagSampler:
    """Samples the lag of every group ``keep`` accepts (all by default) every ``interval_s``;
    ``on_sample`` is called with the history after each sample."""

    def __init__(
        self,
        bootstrap: str,
        topics: InternalTopics,
        history: LagHistory,
        *,
        offsets_partitions: int,
        tls: ClientTls | None = None,
        client_id: str = "kafkacoord-lag",
        interval_s: float = 5.0,
        timeout_s: float = 10.0,
        keep: Callable[[str], bool] | None = None,
        on_sample: Callable[[LagHistory], None] | None = None,
    ) -> None:
        self.history = history
        self._groups = GroupAdmin(
            bootstrap, topic_prefix=topics.prefix, offsets_partitions=offsets_partitions,
            tls=tls, timeout_s=timeout_s,
        )  # fmt: skip
        self._probe = EndOffsetProbe(bootstrap, client_id=f"{client_id}-ends", timeout_s=timeout_s)
        self._keep = keep
        self._on_sample = on_sample
        self._interval_s = interval_s
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lag-sampler", daemon=True)

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def sample_once(self) -> int:
        """Record one lag sample of every kept group; the number of groups sampled."""
        now_ms = int(time.time() * 1000)
        listed = [grp.group_id for grp in self._groups.list_groups() if grp.state != "Dead"]
        groups = [grp for grp in listed if self._keep is None or self._keep(grp)]
        committed = {
            grp: {tp: p.offset for tp, p in self._groups.committed(grp).items()} for grp in groups
        }
        partitions = sorted({tp for offsets in committed.values() for tp in offsets})
        ends = self._probe.latest(partitions) if partitions else {}
        for group, offsets in committed.items():
            self.history.record(group, now_ms, offsets, ends)
        self.history.forget(committed)
        if self._on_sample is not None:
            self._on_sample(self.history)
        return len(groups)

    def _loop(self) -> None:
        while not self._closing.is_set():
            try:
                self.sample_once()
            except (RequestError, StorageError, TimeoutError) as exc:
                log.debug("lag sample skipped", error=str(exc))
            except Exception:
                if not self._closing.is_set():  # closed under it: nothing to report
                    log.exception("lag sample failed")
            self._closing.wait(self._interval_s)

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive():
            # A sample waits on routes that a stopping daemon no longer offers (up to its
            # timeout): the daemon's stop does not wait for it beyond a second.
            self._thread.join(timeout=1)
        self._groups.close()
        self._probe.close()
