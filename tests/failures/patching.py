"""Daemons a test builds by patching kafkacoord's classes run on the sources.

Under the compiled hot path, compiled callers call compiled methods directly, past any
patch set on the class, so a patched fault would never fire. A launcher passes
``SOURCES_ENV`` to such a daemon, and the daemon refuses to start without it.
"""

from __future__ import annotations

import kafkacoord
from kafkacoord.compiled import PURE_ENV, Build

SOURCES_ENV = {PURE_ENV: "1"}


def require_sources() -> None:
    if kafkacoord.BUILD is Build.COMPILED:
        raise SystemExit(
            f"this daemon patches kafkacoord's classes, which the compiled build would call"
            f" past the patch: run it with {PURE_ENV}=1"
        )
