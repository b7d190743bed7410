"""Start-up of the embedded default: launch to every group shard serving.

Each run launches ``kafkacoord daemon`` with a fresh data directory (the embedded
broker, nothing to load) and, with --restart, once more on the same directory (a
fresh broker re-seeded from the cache). Times come from the daemon's own JSON log:
``since_launch_s`` on ``group shards active``, as the kernel counts from exec.

- shards_active_s:  median, launch to all 50 group shards active (target: under 3 s)
- broker_ready_s:   median, launch to ``embedded broker ready``: the floor, what the
                    daemon cannot shorten (the raw baseline of this run)
- restart_shards_active_s: the same after a restart with state to re-seed

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import log

ACTIVE, BROKER = "group shards active", "embedded broker ready"


def _launch(data_dir: Path, timeout_s: float = 60) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACOORD_")}
    env.update(KAFKACOORD_DATA_DIR=str(data_dir), KAFKACOORD_LOG_FORMAT="json",
               KAFKACOORD_METRICS_PORT="0", KAFKACOORD_LISTEN="127.0.0.1:0")  # fmt: skip
    launched = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "kafkacoord", "daemon"], env=env,
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    found: dict[str, float] = {}
    try:
        assert process.stderr is not None
        for line in process.stderr:
            try:
                event: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == BROKER:
                found["broker_ready_s"] = time.monotonic() - launched
            if event.get("event") == ACTIVE and event.get("count", 0) > 0:
                found["shards_active_s"] = float(event["since_launch_s"])
                break
            if time.monotonic() - launched > timeout_s:
                raise TimeoutError(f"no {ACTIVE!r} in {timeout_s}s")
    finally:
        process.terminate()
        process.wait(30)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--restart", action="store_true", help="also time a restart")
    args = parser.parse_args()
    fresh: list[dict[str, float]] = []
    restarts: list[float] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            fresh.append(_launch(Path(tmp) / "data"))
            log(f"run {run}: {fresh[-1]}")
            if args.restart:
                restarts.append(_launch(Path(tmp) / "data")["shards_active_s"])
    result: dict[str, Any] = {
        "shards_active_s": round(statistics.median(r["shards_active_s"] for r in fresh), 2),
        "broker_ready_s": round(statistics.median(r["broker_ready_s"] for r in fresh), 2),
        "runs": args.runs,
    }
    if restarts:
        result["restart_shards_active_s"] = round(statistics.median(restarts), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
