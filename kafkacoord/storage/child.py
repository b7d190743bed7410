"""Child processes that die with their parent: the embedded brokers are never orphaned."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - a Linux without prctl
        return None
    return prctl


def pdeathsig_preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send ``sig`` to the child when its parent dies.

    Caveat: Linux sends the signal when the *thread* that forked the child exits, not the
    process. The daemon, the tests' fixtures and the foreground runner start their broker
    on the main thread, whose end is the process's end. None off Linux (nothing to do).
    """
    prctl = _libc_prctl()  # looked up before the fork: the child only calls it
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def owned_child_kwargs() -> dict[str, Any]:
    """``subprocess.Popen`` arguments for a broker the calling process owns.

    Its own session keeps a terminal's Ctrl-C from reaching the broker, so the owner stops
    it after its own shutdown; the parent-death signal covers every way the owner can die.
    """
    kwargs: dict[str, Any] = {"start_new_session": True}
    preexec = pdeathsig_preexec()
    if preexec is not None:
        kwargs["preexec_fn"] = preexec
    return kwargs


def stop_child(process: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
    """SIGTERM (a clean shutdown), then SIGKILL after ``timeout_s``; False if not running."""
    if process is None or process.poll() is not None:
        return False
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return True
