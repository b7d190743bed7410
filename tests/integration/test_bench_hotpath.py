"""bench/hotpath.py runs the real listener-side path end to end and reports every layer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hotpath.py"


def test_every_commit_is_answered_and_every_layer_reported() -> None:
    # The bench itself fails unless every commit got its reply.
    out = subprocess.run(
        [sys.executable, str(BENCH), "--commits", "700", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["commits"] == 700
    assert set(result["layers_us"]) == {"frames_and_dispatch", "turn", "replies",
                                        "acknowledgements"}  # fmt: skip
    assert set(result["turn_split_us"]) == {"handle", "encode", "submit", "release", "store",
                                            "cache_write", "timers"}  # fmt: skip
    assert all(v > 0 for v in result["layers_us"].values())
    assert result["us_per_commit"] > result["raw_us"] > 0
