"""A point-in-time view of one daemon, read from its services without any I/O.

Both ``/health`` and the metrics collectors work from a :class:`DaemonStatus`, so they
always agree on what the daemon is doing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkacoord.coordinator.runtime.host import HostState
from kafkacoord.server.services.controller import ControllerService
from kafkacoord.server.services.dispatch import RequestDispatcher
from kafkacoord.server.services.groups import GroupService
from kafkacoord.wire import Listener


@dataclass(frozen=True, slots=True)
class ControllerStatus:
    elected: bool
    """This daemon holds the controller election lease."""
    active: bool
    """Elected, loaded, and not superseded: it decides."""
    epoch: int | None
    """The epoch it writes with, while active."""
    activations: int
    elections: Mapping[str, int] = field(default_factory=dict)
    standby_offset: int | None = None
    """How far the hot standby has folded the metadata log (None: not following)."""


@dataclass(frozen=True, slots=True)
class ListenerCounts:
    connections: int
    accepted: int
    refused: int
    requests: int
    bad_frames: Mapping[str, int] = field(default_factory=dict)
    """Frames that closed their connection, by reason."""
    rejected: Mapping[str, int] = field(default_factory=dict)
    """Errors answered before any shard saw the request, by error code."""
    requests_refused: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """The same requests by (api, reason)."""
    paused: Mapping[str, int] = field(default_factory=dict)
    """Times a connection stopped being read, by reason."""
    reading_paused: int = 0
    frames_timed_out: int = 0
    handshakes_timed_out: int = 0
    handshakes_failed: int = 0
    pushes_dropped: int = 0
    buffered_bytes: int = 0


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    node_id: int
    started: bool
    """Start-up finished: topics checked, cache loaded, services running."""
    broker_reachable: bool | None = None
    """``None`` when not probed."""
    controller: ControllerStatus | None = None
    shards: Mapping[str, HostState] = field(default_factory=dict)
    """The shards this daemon leads, by host name (``controller``, ``offsets-N``)."""
    listener: ListenerCounts | None = None


class StatusSource:
    """Reads a :class:`DaemonStatus` from the daemon's services (they may not exist yet)."""

    def __init__(
        self,
        node_id: int,
        *,
        started: Callable[[], bool],
        controller: Callable[[], ControllerService | None],
        groups: Callable[[], GroupService | None],
        listener: Callable[[], Listener | None] = lambda: None,
        dispatcher: RequestDispatcher | None = None,
    ) -> None:
        self.node_id = node_id
        self._started = started
        self._controller = controller
        self._groups = groups
        self._listener = listener
        self._dispatcher = dispatcher

    def _listener_counts(self) -> ListenerCounts | None:
        listener = self._listener()
        if listener is None:
            return None
        stats = listener.stats
        dispatch = None if self._dispatcher is None else self._dispatcher.stats
        return ListenerCounts(
            stats.connections, stats.accepted, stats.refused, stats.requests,
            dict(stats.bad_frames),
            {} if dispatch is None else dict(dispatch.rejected),
            {} if dispatch is None else dict(dispatch.refused),
            paused=dict(stats.paused), reading_paused=stats.reading_paused,
            frames_timed_out=stats.frames_timed_out,
            handshakes_timed_out=stats.handshakes_timed_out,
            handshakes_failed=stats.handshakes_failed, pushes_dropped=stats.pushes_dropped,
            buffered_bytes=stats.buffered_bytes,
        )  # fmt: skip

    def read(self, broker_reachable: bool | None = None) -> DaemonStatus:
        shards: dict[str, HostState] = {}
        controller = self._controller()
        controller_status = None
        if controller is not None:
            elected = controller.elected
            host = controller.host
            # A host left behind by a lost lease is not this daemon's to serve.
            if elected and host is not None:
                shards[host.name] = host.state
            controller_status = ControllerStatus(
                elected=elected,
                active=controller.active,
                epoch=controller.epoch,
                activations=controller.activations,
                elections=dict(controller.elections),
                standby_offset=controller.standby_offset,
            )
        groups = self._groups()
        if groups is not None:
            for host in list(groups.hosts.values()):
                shards[host.name] = host.state
        return DaemonStatus(
            node_id=self.node_id,
            started=self._started(),
            broker_reachable=broker_reachable,
            controller=controller_status,
            shards=shards,
            listener=self._listener_counts(),
        )


def shard_sort_key(name: str) -> tuple[str, int]:
    """``controller`` first, then ``offsets-N`` by N."""
    base, _, number = name.rpartition("-")
    if number.isdigit():
        return (base, int(number))
    return ("", 0) if name == "controller" else (name, -1)


__all__ = [
    "ControllerStatus",
    "DaemonStatus",
    "ListenerCounts",
    "StatusSource",
    "shard_sort_key",
]
