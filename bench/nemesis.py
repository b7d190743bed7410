"""A fault campaign against kafkacoord, checked as a whole history (see tests/nemesis).

    python bench/nemesis.py --broker tansu|kafka --seconds N --seed S [--out DIR]

Runs as root: every daemon, broker and client runs in a network namespace of its own.
The schedule of faults a seed draws is printed first, so a failing run can be replayed
with the same seed. Writes the history, the anomalies and a timeline plot (timeline.png)
to DIR, and prints a final JSON line: broker, seconds, faults by kind, operations by
outcome, anomalies by kind (all zero is a pass) and the longest recovery after a heal.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib import BROKERS, log

from tests.nemesis.campaign import KINDS, Campaign
from tests.nemesis.netlab import available


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=BROKERS, default="tansu")
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--out", type=Path, default=None, help="default: a new temp dir")
    parser.add_argument(
        "--faults", default=None, help=f"comma-separated kinds (default: all; {','.join(KINDS)})"
    )
    args = parser.parse_args()
    missing = available()
    if missing:
        log(f"error: {missing}")
        return 2
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    out = args.out or Path(tempfile.mkdtemp(prefix=f"nemesis-{args.broker}-"))
    log(f"nemesis: broker {args.broker}, {args.seconds:.0f}s, seed {seed}, output in {out}")
    kinds = tuple(args.faults.split(",")) if args.faults else None
    unknown = set(kinds or ()) - set(KINDS)
    if unknown:
        log(f"error: unknown fault kinds {sorted(unknown)}")
        return 2
    campaign = Campaign(args.broker, out, seed=seed, log=log, kinds=kinds)
    try:
        campaign.start()
        result = campaign.run(args.seconds)
    finally:
        campaign.close()
    for detail in result.details[:50]:
        log(f"anomaly: {detail}")
    print(json.dumps(result.line()), flush=True)
    return 1 if any(result.anomalies.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
