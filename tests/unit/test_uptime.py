"""The process's age as the kernel counts it, from exec."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkacoord.server.uptime import process_uptime_s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_uptime_counts_from_the_launch() -> None:
    code = (
        "import time; time.sleep(0.6)\n"
        "from kafkacoord.server.uptime import process_uptime_s\n"
        "print(process_uptime_s())"
    )
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)  # fmt: skip
    assert 0.6 <= age < 10
    mine = process_uptime_s()
    assert mine is not None and mine > 0
