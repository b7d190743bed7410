"""Failures that leave the shard serving: how a host runs handlers, timers and internal
events on its shard so that one that throws does not stop it.

- A handler that throws answers its own request with an error (``UNKNOWN_SERVER_ERROR``,
  or the ``ProtocolError``'s code); the shard put its soft state back itself.
- An internal event (new topics, an admin hook) that throws is tried again after a
  backoff that doubles, as Kafka's runtime retries a failed event, and dropped if it
  keeps failing.
- Should a shard's own firing of its timers throw, its timers wait a backoff.
- A replay that throws leaves the shard half-changed (:class:`ReplayError`): the host
  is asked to reload it (:attr:`Guards.reset_cause`) once its appends finish.

See docs/architecture.md#failed-handlers.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import structlog

from kafkacoord.coordinator.protocol import ErrorCode, ProtocolError

from .shard import Reply, Request, Result, Shard, encode_records, replay_result
from .timers import doubling

log = structlog.get_logger(__name__)

EVENT_BACKOFF_MS = 100
EVENT_BACKOFF_MAX_MS = 5_000
EVENT_ATTEMPTS = 5

Event = Callable[[Shard, int], Result]
"""An internal event: run on the shard as if it were a handler."""


class ReplayError(Exception):
    """Replaying a result threw: the shard may be half-changed and must be reloaded."""


def apply_result(shard: Shard, result: Result) -> Result:
    """Encode a result's records (if its handler did not), then replay them.

    Encoding first means a record no schema can hold is refused before anything
    changed. A replay that throws leaves the shard half-changed: :class:`ReplayError`.
    """
    encode_records(result.records)
    try:
        return replay_result(shard, result)
    except Exception as exc:
        raise ReplayError(f"{type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Retry:
    """An internal event queued again after it failed ``attempt`` times."""

    fn: Event
    attempt: int


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", type(fn).__name__)


def _server_error(request: Request, exc: BaseException) -> Reply:
    message = f"{type(exc).__name__}: {exc}"
    return Reply(request.ref, request.api, ErrorCode.UNKNOWN_SERVER_ERROR, None,
                 message if len(message) <= 300 else message[:297] + "...")  # fmt: skip


class Guards:
    """One host's guarded runs, and the backoffs of what failed."""

    def __init__(self, name: str) -> None:
        self.name = name
        # Why the shard reloads once its appends finish (see reset), if it does.
        self.reset_cause: str | None = None
        # Timers wait until then after the shard's firing threw (clock ms).
        self._timers_resume_ms = 0
        self._timer_failures = 0
        # Internal events to try again: (due clock ms, seq, attempt, event).
        self._retrying: list[tuple[int, int, int, Event]] = []
        self._retry_seq = itertools.count()

    def loaded(self) -> None:
        """A new shard was loaded: a load is the reset, and its timers start afresh."""
        self.reset_cause = None
        self._timers_resume_ms, self._timer_failures = 0, 0

    def next_deadline_ms(self, shard: Shard | None) -> int | None:
        """When a timer or a retry is due next (clock ms), if any is."""
        deadline = None if shard is None or self.reset_cause else shard.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self._timers_resume_ms)
        if self._retrying:
            retry_at = self._retrying[0][0]
            deadline = retry_at if deadline is None else min(deadline, retry_at)
        return deadline

    def due_retries(self, now: int) -> list[object]:
        """The internal events due to be tried again, as events of the next step."""
        due: list[object] = []
        while self._retrying and self._retrying[0][0] <= now:
            _, _, attempt, fn = heapq.heappop(self._retrying)
            due.append(_Retry(fn, attempt))
        return due

    def handle(self, shard: Shard, request: Request, now: int) -> Result:
        """Run ``request``'s handler; a failure answers it with an error."""
        try:
            result = shard.handle(request, now)
        except ProtocolError as exc:
            return Result(replies=[Reply(request.ref, request.api, exc.code, None, exc.message)])
        except Exception as exc:
            log.exception("handler failed", shard=self.name, api=request.api)
            return Result(replies=[_server_error(request, exc)])
        try:
            return apply_result(shard, result)
        except ReplayError as exc:
            self.reset(f"{request.api} replay failed", exc)
            return Result(replies=[_server_error(request, exc)])
        except Exception as exc:  # not encodable: nothing was replayed
            log.error("handler result refused", shard=self.name, api=request.api,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            self.reset(f"{request.api} result not encodable", exc)
            return Result(replies=[_server_error(request, exc)])

    def event(self, shard: Shard, event: object, now: int) -> Result:
        """Run an internal event (or one due again) as if it were a handler: one that
        throws is retried after a backoff, and dropped if it keeps failing."""
        if isinstance(event, _Retry):
            fn, attempt = event.fn, event.attempt
        else:
            fn, attempt = cast("Event", event), 0
        try:
            result = fn(shard, now)
        except Exception as exc:
            if attempt + 1 >= EVENT_ATTEMPTS:
                log.error("shard event failed again; dropped", shard=self.name, handler=_name(fn),
                          attempts=attempt + 1, error=f"{type(exc).__name__}: {exc}",
                          exc_info=exc)  # fmt: skip
                return Result()
            backoff_ms = int(doubling(EVENT_BACKOFF_MS, attempt, EVENT_BACKOFF_MAX_MS))
            heapq.heappush(
                self._retrying, (now + backoff_ms, next(self._retry_seq), attempt + 1, fn)
            )
            log.error("shard event failed; retrying after a backoff", shard=self.name,
                      handler=_name(fn), backoff_ms=backoff_ms,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            return Result()
        try:
            return apply_result(shard, result)
        except Exception as exc:
            self.reset("event result failed", exc)
            return Result()

    def fire_timers(self, shard: Shard, now: int) -> Result:
        """Fire due timers. The shards guard each timer themselves (put back, retried with
        a backoff, dropped if it keeps failing); should a shard's own firing throw, its
        timers wait a backoff here instead of stopping the host."""
        if now < self._timers_resume_ms or self.reset_cause is not None:
            return Result()
        try:
            result = shard.fire_timers(now)
        except Exception as exc:
            self._timer_failures += 1
            backoff_ms = int(doubling(EVENT_BACKOFF_MS, self._timer_failures - 1,
                                      EVENT_BACKOFF_MAX_MS))  # fmt: skip
            self._timers_resume_ms = now + backoff_ms
            log.error("shard timers failed; retrying after a backoff", shard=self.name,
                      backoff_ms=backoff_ms, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)  # fmt: skip
            return Result()
        self._timer_failures = 0
        try:
            return apply_result(shard, result)
        except Exception as exc:
            self.reset("timer result failed", exc)
            return Result()

    def reset(self, cause: str, exc: BaseException) -> None:
        """The shard's memory can no longer be trusted (a replay threw half-way): the
        host takes no new work, lets what was handled before become durable and be
        answered, then loads the shard again from the cache and the log."""
        if self.reset_cause is None:
            log.error("shard state suspect; reloading it once its appends finish",
                      shard=self.name, cause=cause, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)  # fmt: skip
            self.reset_cause = cause


__all__ = ["EVENT_ATTEMPTS", "Event", "Guards", "ReplayError", "apply_result"]
