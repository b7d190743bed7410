"""Every thread and timer of the daemon starts here: named, tracked, and stopped in order.

A :class:`Supervisor` owns the threads its owner starts, directly or through the threads
it started: :func:`spawn` and :func:`later` run the new thread in a copy of the caller's
context, so a daemon's supervisor (set with :func:`supervising`) follows its work into
every thread, with no supervisor passed through constructors. Outside any daemon the
process's own supervisor owns them.

A supervised thread that dies of an exception logs it with its name. The daemon's stop
cancels its pending timers and joins what is left, newest first, once its services have
closed; a thread still alive then is named in the log, which is how a service that does
not stop its thread shows up.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class Supervisor:
    """The threads and timers of one owner (a daemon, or the process)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._timers: list[threading.Timer] = []
        self.stopped = False

    def thread(
        self, name: str, target: Callable[..., object], *args: Any, start: bool = True
    ) -> threading.Thread:
        """A daemon thread running ``target(*args)`` in the caller's context."""
        context = contextvars.copy_context()
        thread = threading.Thread(
            target=context.run, args=(self._guarded, name, target, *args), name=name, daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive() or not t.ident]
            self._threads.append(thread)
        if start:
            thread.start()
        return thread

    def timer(
        self, delay_s: float, fn: Callable[..., object], *args: Any, name: str
    ) -> threading.Timer:
        """Run ``fn(*args)`` after ``delay_s`` on a thread of its own, unless cancelled
        first (by the caller, or by :meth:`stop`)."""
        context = contextvars.copy_context()
        timer = threading.Timer(delay_s, context.run, (self._guarded, name, fn, *args))
        timer.name, timer.daemon = name, True
        with self._lock:
            if self.stopped:
                return timer  # never started: its owner is stopping
            self._timers = [t for t in self._timers if not t.finished.is_set()]
            self._timers.append(timer)
        timer.start()
        return timer

    def alive(self) -> list[str]:
        """The names of the threads and pending timers still running."""
        with self._lock:
            threads = [t.name for t in self._threads if t.is_alive()]
            timers = [t.name for t in self._timers if not t.finished.is_set()]
        return threads + timers

    def stop(self, timeout_s: float = 5.0) -> list[str]:
        """Cancel the pending timers, then join the threads, newest first, for at most
        ``timeout_s`` in all; the names of those still alive. Stopping a thread is its
        owner's business: this only waits for the owners' stops to take effect."""
        with self._lock:
            self.stopped = True
            timers, self._timers = self._timers, []
            threads = list(self._threads)
        for timer in timers:
            timer.cancel()
        deadline = time.monotonic() + timeout_s
        current = threading.current_thread()
        for thread in reversed(threads):
            if thread is not current and thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in threads if t.is_alive() and t is not current]

    @staticmethod
    def _guarded(name: str, target: Callable[..., object], *args: Any) -> None:
        try:
            target(*args)
        except Exception:
            log.exception("thread died", thread=name)


PROCESS = Supervisor("process")
_CURRENT: contextvars.ContextVar[Supervisor] = contextvars.ContextVar(
    "kafkacoord_supervisor", default=PROCESS
)


def current() -> Supervisor:
    return _CURRENT.get()


@contextlib.contextmanager
def supervising(supervisor: Supervisor) -> Iterator[Supervisor]:
    """Threads started in this block, and the threads they start, belong to ``supervisor``."""
    token = _CURRENT.set(supervisor)
    try:
        yield supervisor
    finally:
        _CURRENT.reset(token)


def spawn(
    name: str, target: Callable[..., object], *args: Any, start: bool = True
) -> threading.Thread:
    """A named daemon thread, owned by the current supervisor."""
    return current().thread(name, target, *args, start=start)


def later(delay_s: float, fn: Callable[..., object], *args: Any, name: str) -> threading.Timer:
    """A named timer, owned by the current supervisor."""
    return current().timer(delay_s, fn, *args, name=name)


__all__ = ["PROCESS", "Supervisor", "current", "later", "spawn", "supervising"]
