"""A node's lease on what it leads, renewed by each heartbeat the controller answers.

The controller fences a node only once its session passes with no heartbeat arriving
(``coordinator/controller/nodes.py``), and only then gives the node's partitions to
others. A heartbeat sent at ``t`` and answered unfenced arrived after ``t``, so nothing
this node leads can belong to another node before ``t`` plus the session: until then an
answer from its memory is current. A node cut off from the controller (or paused) loses
the lease when that time passes, before any other node can have taken over.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class NodeLease:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._until = 0.0
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
            self._until = max(self._until, sent + session_timeout_ms / 1000)
        return True

    def held(self) -> bool:
        return self._monotonic() < self._until

    def remaining_s(self) -> float:
        return max(0.0, self._until - self._monotonic())
