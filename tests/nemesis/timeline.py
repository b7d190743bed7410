"""A Jepsen-style picture of a campaign: every op per process, latencies, and fault windows.

matplotlib is imported inside ``plot`` so the checker and the history stay importable
without it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from .history import Entry, Fault, Op

_OUTCOME_COLOURS = {"ok": "tab:green", "fail": "tab:red", "unknown": "tab:orange"}
_FAULT_COLOURS = ("tab:purple", "tab:cyan", "tab:olive", "tab:brown", "tab:pink", "tab:gray")


def plot(entries: list[Entry], faults: list[Fault], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    base = min([e.t0 for e in entries] + [f.t0 for f in faults], default=0)

    def sec(t: int) -> float:
        return (t - base) / 1e9

    processes = sorted({e.process for e in entries}, key=_natural)
    row = {p: i for i, p in enumerate(processes)}
    ops = [e for e in entries if isinstance(e, Op)]
    height = max(2.5, 0.22 * len(processes))
    fig, (top, low) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(14, height + 3.5),
        gridspec_kw={"height_ratios": [height, 3.0]},
        squeeze=True,
    )

    # Ops as segments on their process's row; one collection draws 100k of them quickly.
    segments = [[(sec(op.t0), row[op.process]), (sec(op.t1), row[op.process])] for op in ops]
    colours = [_OUTCOME_COLOURS.get(op.outcome, "black") for op in ops]
    if segments:
        top.add_collection(LineCollection(segments, colors=colours, linewidths=4))
    observed = [e for e in entries if not isinstance(e, Op)]
    if observed:
        top.scatter(
            [sec(e.t0) for e in observed],
            [row[e.process] for e in observed],
            s=6,
            c="black",
            zorder=3,
        )
    top.set_yticks(range(len(processes)), processes, fontsize=7)
    top.set_ylim(max(len(processes), 1), -1)  # first process on top
    top.set_title(title)

    # Latency per kind of op; zero-length calls are clamped so log scale can draw them.
    by_f: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for op in ops:
        xs, ys = by_f[op.f]
        xs.append(sec(op.t0))
        ys.append(max((op.t1 - op.t0) / 1e6, 1e-3))
    for f, (xs, ys) in sorted(by_f.items()):
        low.scatter(xs, ys, s=3, label=f, alpha=0.6)
    low.set_yscale("log")
    low.set_ylabel("latency (ms)")
    low.set_xlabel("time (s)")

    kinds = sorted({f.kind for f in faults})
    fault_colour = {k: _FAULT_COLOURS[i % len(_FAULT_COLOURS)] for i, k in enumerate(kinds)}
    for axis in (top, low):
        for fault in faults:
            axis.axvspan(sec(fault.t0), sec(fault.t1), color=fault_colour[fault.kind], alpha=0.15)
    # Kinds outnumber distinguishable colours: each window is named where it begins.
    for fault in faults:
        top.annotate(
            f"{fault.kind} {fault.target}", (sec(fault.t0), 1.0),
            xycoords=("data", "axes fraction"), rotation=90, fontsize=6, va="top",
            ha="left", xytext=(1, -2), textcoords="offset points",
        )  # fmt: skip
    fault_handles: list[Any] = [
        Patch(color=fault_colour[k], alpha=0.3, label=f"fault: {k}") for k in kinds
    ]
    outcome_handles: list[Any] = [
        Line2D([], [], color=c, linewidth=4, label=o) for o, c in _OUTCOME_COLOURS.items()
    ]
    # Legends outside the panels, so they hide no call.
    top.legend(handles=outcome_handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    low_handles, _ = low.get_legend_handles_labels()
    if low_handles or fault_handles:
        low.legend(handles=list(low_handles) + fault_handles, loc="upper left",
                   bbox_to_anchor=(1.0, 1.0), fontsize=7)  # fmt: skip

    end = max([sec(e.t0) for e in entries] + [sec(op.t1) for op in ops], default=0.0)
    end = max([end] + [sec(f.t1) for f in faults])
    top.set_xlim(0, max(end, 1e-3) * 1.01)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _natural(name: str) -> list[tuple[int, int | str]]:
    """Sorts ``w2`` before ``w10``."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)]
