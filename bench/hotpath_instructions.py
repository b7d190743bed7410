"""Instructions per commit on the listener's path, counted by valgrind: a figure that
noise on a shared machine does not move.

hotpath.py's timings swing by ±20% between runs here; valgrind's callgrind counts the
instructions a process runs, the same for the same code and input whatever else the
machine does. This runs hotpath.py's pass (``run_once``) and its raw baseline
(``raw_once``) in child processes under callgrind, each twice: over ``--warm`` commits
and over ``--warm`` + ``--commits``. The difference over ``--commits`` cancels start-up
and imports. With ``--against DIR`` the same is counted for another checkout of
kafkacoord (put first on the children's PYTHONPATH), in the same run.

- instructions_per_commit:      the listener's path (frames to replies)
- raw_instructions_per_commit:  the baseline: decode, encode and RocksDB writes only
- runtime_ratio:                the first over the second
- against:                      the same three for ``--against``, and ``change``, this
                                tree's instructions per commit over that tree's

User-space instructions only: the kernel's share (socket writes, the RocksDB log) is
not counted, and instructions are not time. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchlib import log

BENCH = Path(__file__).resolve().parent
_CHILD = """
import sys
sys.path.insert(0, {bench!r})
import hotpath
from kafkacoord.gc_pause import raise_young_threshold
raise_young_threshold()
data = hotpath.frames({total})[: {count}]
(hotpath.run_once(data, {per_turn}, False) if {path!r} == "path" else
 hotpath.raw_once(data, {per_turn}))
"""
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def counted(kind: str, count: int, total: int, per_turn: int, tree: Path) -> int:
    """Instructions a child runs for ``count`` commits of ``kind`` ("path" or "raw")."""
    code = _CHILD.format(bench=str(BENCH), total=total, count=count, per_turn=per_turn,
                         path=kind)  # fmt: skip
    env = dict(os.environ)
    # The tree first, whatever an editable install points at; and not the working
    # directory, which ``-c`` would put ahead of it.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = "0"  # string hashes, and so dict probes, the same every run
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", code],
        env=env, cwd=BENCH, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


def per_commit(tree: Path, warm: int, commits: int, per_turn: int) -> dict[str, float]:
    total = warm + commits
    jobs = [(kind, n) for kind in ("path", "raw") for n in (warm, total)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # one child per core
        counts = list(pool.map(lambda job: counted(*job, total, per_turn, tree), jobs))
    path = (counts[1] - counts[0]) / commits
    raw = (counts[3] - counts[2]) / commits
    return {
        "instructions_per_commit": round(path),
        "raw_instructions_per_commit": round(raw),
        "runtime_ratio": round(path / raw, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=4000)
    parser.add_argument("--warm", type=int, default=200, help="commits both counts share")
    parser.add_argument("--per-turn", type=int, default=7)
    parser.add_argument("--against", type=Path, help="another checkout to count the same way")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    mine = per_commit(BENCH.parent, args.warm, args.commits, args.per_turn)
    log(f"this tree: {mine}")
    result: dict[str, object] = {"commits": args.commits, "per_turn": args.per_turn, **mine}
    if args.against is not None:
        against = per_commit(args.against.resolve(), args.warm, args.commits, args.per_turn)
        against["change"] = round(
            mine["instructions_per_commit"] / against["instructions_per_commit"], 3
        )
        log(f"{args.against}: {against}")
        result["against"] = against
    print(json.dumps(result))


if __name__ == "__main__":
    main()
