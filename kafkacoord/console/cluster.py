"""What the console reads and writes, through the same clients as the CLI.

:class:`ClusterAccess` owns a live metadata image, a group admin, a controller admin
and an end-offset probe, and reads the lag from the daemon's :class:`~.lag.LagHistory`
(:class:`~.sampler.LagSampler` fills it). Writes are the CLI's admin calls, so they fail
with the CLI's errors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.group_admin import GroupAdmin
from kafkacoord.client.group_history import GroupAsOf, group_as_of
from kafkacoord.client.offset_reset import ResetMode, reset_plan
from kafkacoord.coordinator.groups.consumer_protocol import assigned_partitions
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.controller_api import PartitionResult
from kafkacoord.storage.ends_at import log_end_offsets_at
from kafkacoord.storage.errors import StorageError
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.storage.watermarks import EndOffsetProbe
from kafkacoord.wire import ClientTls

from .lag import LagHistory
from .live import LiveMetadata

__all__ = ["ClusterAccess", "GroupView", "ResetResult", "Writer", "WritesOffError"]

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Writer:
    """How the console's writes reach the daemons (None: plaintext)."""

    tls: ClientTls | None


class WritesOffError(RuntimeError):
    """A write asked of a :class:`ClusterAccess` built without a writer."""


@dataclass(slots=True)
class GroupView:
    """One group: its description, committed offsets and log ends."""

    described: g.DescribedGroup
    committed: dict[TP, int]
    ends: dict[TP, int]
    error: str | None = None


@dataclass(slots=True)
class ResetResult:
    """A reset's plan (current -> new), and per-partition errors once applied."""

    plan: dict[TP, tuple[int | None, int]]
    applied: bool
    errors: dict[TP, str] = field(default_factory=dict)


class ClusterAccess:
    """The console's clients, and the lag history it shows."""

    def __init__(
        self,
        bootstrap: str,
        topics: InternalTopics,
        *,
        offsets_partitions: int,
        tls: ClientTls | None = None,
        client_id: str = "kafkacoord-console",
        lag: LagHistory | None = None,
        timeout_s: float = 10.0,
        writer: Writer | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.metadata = LiveMetadata(bootstrap, topics.metadata, client_id=f"{client_id}-meta")
        self.groups = GroupAdmin(
            bootstrap, topic_prefix=topics.prefix, offsets_partitions=offsets_partitions,
            tls=tls, timeout_s=timeout_s,
        )  # fmt: skip
        # Writes go through clients of their own, with the writer's certificate: never
        # with the one the reads use (the daemon's own, under mutual TLS).
        self._write_groups: GroupAdmin | None = None
        self.controller: ControllerAdmin | None = None
        if writer is not None:
            self._write_groups = GroupAdmin(
                bootstrap, topic_prefix=topics.prefix, offsets_partitions=offsets_partitions,
                tls=writer.tls, timeout_s=timeout_s,
            )  # fmt: skip
            self.controller = ControllerAdmin(bootstrap, topics, tls=writer.tls,
                                              timeout_s=timeout_s)  # fmt: skip
        self.lag = lag or LagHistory()
        self._probe = EndOffsetProbe(bootstrap, client_id=f"{client_id}-ends", timeout_s=timeout_s)
        self._probe_lock = threading.Lock()

    # -- reads ---------------------------------------------------------------------------

    def list_groups(self) -> list[g.ListedGroup]:
        return [grp for grp in self.groups.list_groups() if grp.state != "Dead"]

    def committed(self, group: str) -> dict[TP, int]:
        return {tp: p.offset for tp, p in self.groups.committed(group).items()}

    def ends(self, partitions: list[TP]) -> dict[TP, int]:
        if not partitions:
            return {}
        with self._probe_lock:
            return self._probe.latest(partitions)

    def group(self, group_id: str) -> GroupView | None:
        return _view(group_id, self.groups, self.ends)

    def group_as_of(self, group_id: str, instant_ms: int, now_ms: int) -> GroupView | None:
        """The group at ``instant_ms``, from its shard of the offsets log (as ``groups
        describe --as-of``); HistoryUnavailableError before the log's history window."""
        topics = replace(self.topics, offsets_partitions=self.groups.channel.partitions)
        past = group_as_of(self.bootstrap, topics, group_id, instant_ms, now_ms)

        def ends(partitions: list[TP]) -> dict[TP, int]:
            return log_end_offsets_at(self.bootstrap, partitions, instant_ms)

        return _view(group_id, past, ends)

    # -- writes (the CLI's admin calls) --------------------------------------------------

    def _controller(self) -> ControllerAdmin:
        if self.controller is None:
            raise WritesOffError("this console was started without writes")
        return self.controller

    def cancel_reassignments(self, partitions: list[TP]) -> dict[TP, str]:
        """Stop these reassignments (Kafka: a null target); errors by partition."""
        return _failures(self._controller().alter_reassignments(dict.fromkeys(partitions)))

    def stop_rebalance(self) -> str:
        """Stop the running rebalance; its new state."""
        return self._controller().stop_rebalance().state

    def elect_preferred(self, partitions: list[TP] | None) -> dict[TP, str]:
        results = self._controller().elect_leaders("preferred", partitions)
        return _failures(results, ErrorCode.ELECTION_NOT_NEEDED)

    def reset_offsets(
        self, group: str, topic: str | None, mode: ResetMode, value: int, *, apply: bool
    ) -> ResetResult:
        """Plan a reset of ``topic`` (every committed topic when None); apply it if asked."""
        committed = self.committed(group)
        with self._probe_lock:
            # A named topic: every partition the broker has (groups consume Kafka topics,
            # not the controller's placed ones), as the CLI's --topic does.
            partitions = (
                sorted(committed) if topic is None
                else self._probe.partitions([topic], missing_ok=True)
            )  # fmt: skip
            if not partitions:
                raise ValueError(f"group {group!r} has nothing to reset for {topic or 'any topic'}")
            starts = self._probe.earliest(partitions)
            ends = self._probe.latest(partitions)
        plan = reset_plan(mode, partitions, committed=committed, starts=starts, ends=ends,
                          value=value)  # fmt: skip
        result = ResetResult({tp: (committed.get(tp), o) for tp, o in plan.items()}, apply)
        if apply:
            if self._write_groups is None:
                raise WritesOffError("this console was started without writes")
            result.errors = {
                tp: code.name
                for tp, code in self._write_groups.reset_offsets(group, plan).items()
                if code is not ErrorCode.NONE
            }
        return result

    def close(self) -> None:
        self.metadata.close()
        self.groups.close()
        if self._write_groups is not None:
            self._write_groups.close()
        if self.controller is not None:
            self.controller.close()
        with self._probe_lock:
            self._probe.close()


def _failures(results: list[PartitionResult], *fine: ErrorCode) -> dict[TP, str]:
    """The partitions a controller call failed for, with the error and its message."""
    return {
        (r.topic, r.partition): f"{r.error.name}: {r.message or ''}".rstrip(": ")
        for r in results
        if r.error is not ErrorCode.NONE and r.error not in fine
    }


def _view(
    group_id: str, reads: GroupAdmin | GroupAsOf, ends: Callable[[list[TP]], dict[TP, int]]
) -> GroupView | None:
    [described] = reads.describe_groups([group_id])
    if described.error is not ErrorCode.NONE or described.state == "Dead":
        return None
    committed = {tp: p.offset for tp, p in reads.committed(group_id).items()}
    owned = {tp for m in described.members for tp in assigned_partitions(m.assignment)}
    try:
        found = ends(sorted(set(committed) | owned))
    except StorageError as exc:
        return GroupView(described, committed, {}, f"log end offsets unavailable: {exc}")
    return GroupView(described, committed, found)
