"""Seconds since this process was launched, as the kernel counts them (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def process_uptime_s() -> float | None:
    """From exec, not from an import: start-up costs include the interpreter's own."""
    try:
        stat = Path("/proc/self/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError):
        return None  # not Linux: the log line simply goes without it
    # Field 22 (starttime, in clock ticks since boot) counts from after the command name.
    started_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return round(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 2)
