"""The contract between a shard host and the processor that drives it.

:mod:`.host` and :mod:`.processor` both depend on this module and not on each other: the
processor steps any :class:`DrivenHost`, and a host hands its events to any
:class:`Processor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from .shard import ReplySink, Request
from .turn import Turn

__all__ = ["ATTACH", "WAKE", "DrivenHost", "Processor"]

ATTACH: Final = object()  # a host finished loading: drive it from now on
WAKE: Final = object()  # a host's append finished: release it


class DrivenHost(Protocol):
    """What a processor needs from a host it drives."""

    # Set by the host when it lets go to reload on a thread of its own; the processor
    # clears it and drops the host until it attaches again.
    detached: bool

    def wait_s(self) -> float:
        """How long the host may wait for events before a timer is due."""
        ...

    def step(self, events: list[object], turn: Turn) -> bool:
        """Handle ``events`` within ``turn``; False once the host has stopped."""
        ...

    def refuse(self, request: Request) -> None:
        """Answer a request that reached the host while it was not attached."""
        ...

    def finish(self, failure: Exception | None = None) -> None:
        """Let go of the host after it stopped (``failure``: why, if it failed)."""
        ...

    def fail(self, exc: Exception) -> None:
        """Log why the host failed, then :meth:`finish` it."""
        ...


class Processor(Protocol):
    """What a host needs from whatever drives it (a thread, or an event loop)."""

    @property
    def replies(self) -> ReplySink:
        """Where the hosts it drives send their replies."""
        ...

    def put(self, host: DrivenHost, event: object) -> None: ...

    def put_many(self, events: Sequence[tuple[DrivenHost, object]]) -> None: ...

    def on_its_thread(self) -> bool: ...

    def close(self, timeout_s: float = 10.0) -> None: ...
