"""A node's lease on what it leads, renewed by each heartbeat the controller answers.

The controller fences a node only once its session passes with no heartbeat arriving
(``coordinator/controller/nodes.py``), and only then gives the node's partitions to
others. A heartbeat sent at ``t`` and answered unfenced arrived after ``t``, so nothing
this node leads can belong to another node before ``t`` plus the session: until then an
answer from its memory is current. A node cut off from the controller (or paused) loses
the lease when that time passes, before any other node can have taken over.

An answer that renews a lapsed lease does not restore it at once: while it lapsed, the
controller may have fenced the node (its first heartbeat after unfences it) and moved
what it led. The lease holds again only once the node's metadata tail has read to the
log's end as it stood after the answer, and so has seen every such move (KRaft's broker
is likewise unfenced only once its metadata has caught up).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class NodeLease:
    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        read_to: Callable[[], int] = lambda: 0,
    ) -> None:
        """``read_to``: the metadata log offset the node's tail has read up to."""
        self._monotonic = monotonic
        self._read_to = read_to
        self._until = 0.0
        # The metadata offset the tail must reach before the lease holds; infinite while
        # the log's end after a renewal of a lapsed lease is still to be read.
        self._barrier: float = 0
        # The newest controller epoch that answered: an older one is a deposed controller.
        self.controller_epoch = -1

    def now(self) -> float:
        return self._monotonic()

    def answered(
        self,
        sent: float,
        *,
        fenced: bool,
        session_timeout_ms: int,
        controller_epoch: int,
        known_epoch: int = -1,
    ) -> bool:
        """The answer of controller ``controller_epoch`` to a heartbeat sent at ``sent``
        (from :meth:`now`); ``known_epoch`` is the newest the node has read in the log.
        False, and nothing changes, when a newer controller is known: a deposed one that
        has not noticed yet vouches for nothing."""
        if controller_epoch < max(self.controller_epoch, known_epoch):
            return False
        self.controller_epoch = controller_epoch
        if fenced or session_timeout_ms <= 0:
            self._until = 0.0
        else:
            if self._monotonic() >= self._until:
                self._barrier = math.inf  # lapsed: read the log's end before holding it
            self._until = max(self._until, sent + session_timeout_ms / 1000)
        return True

    def needs_log_end(self) -> bool:
        """A renewal waits for :meth:`log_end`: the metadata log's end, read after it."""
        return self._barrier == math.inf

    def log_end(self, offset: int) -> None:
        if self._barrier == math.inf:
            self._barrier = offset

    def held(self) -> bool:
        # Read-only: the heartbeat thread alone writes (the tail's offset only grows).
        return self._monotonic() < self._until and (
            not self._barrier or self._read_to() >= self._barrier
        )

    def remaining_s(self) -> float:
        """How long the lease runs, as granted (whether or not the tail has caught up)."""
        return max(0.0, self._until - self._monotonic())
