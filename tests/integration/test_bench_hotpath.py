"""bench/hotpath.py runs the real listener-side path end to end and reports every layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkacoord.compiled import Build, decide

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hotpath.py"


@pytest.mark.parametrize("pure", [False, True], ids=["as-built", "pure"])
def test_every_commit_is_answered_and_every_layer_reported(pure: bool) -> None:
    # The bench itself fails unless every commit got its reply; with KAFKACOORD_PURE=1 the
    # same path runs from its sources, which a compiled build otherwise shadows.
    out = subprocess.run(
        [sys.executable, str(BENCH), "--commits", "700", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, check=True,
        env={**os.environ, "KAFKACOORD_PURE": "1" if pure else "0"},
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    as_built = decide(environ={})[0]
    expected = Build.DISABLED if pure and as_built is not Build.PURE else as_built
    assert result["build"] == expected.value
    assert result["commits"] == 700
    assert set(result["layers_us"]) == {"frames_and_dispatch", "turn", "replies",
                                        "acknowledgements"}  # fmt: skip
    if expected is Build.COMPILED:
        assert result["turn_split_us"] is None  # its methods cannot be wrapped in timers
    else:
        assert set(result["turn_split_us"]) == {"handle", "encode", "submit", "release",
                                                "store", "cache_write", "timers"}  # fmt: skip
    assert all(v > 0 for v in result["layers_us"].values())
    assert result["us_per_commit"] > result["raw_us"] > 0
