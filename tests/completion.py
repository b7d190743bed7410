"""Shell completion as bash runs it: the script ``--show-completion`` prints, sourced in a
real bash, whose completion function calls ``kafkacoord`` with the words typed so far."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# ``python -m kafkacoord`` would name itself "python -m kafkacoord"; an installed entry
# point is named kafkacoord, and the completion protocol keys on that name.
_ENTRY_POINT = """#!/bin/sh
exec "{python}" -c 'from kafkacoord.cli.main import app; app(prog_name="kafkacoord")' "$@"
"""

_BASH = """
set -e
source <(kafkacoord --show-completion)
COMP_WORDS=({words})
COMP_CWORD={cword}
_kafkacoord_completion kafkacoord
printf '%s\\n' "${{COMPREPLY[@]}}"
"""


@dataclass(frozen=True)
class Completed:
    offered: list[str]
    stderr: str
    elapsed_s: float


def install_entry_point(bin_dir: Path) -> Path:
    """A ``kafkacoord`` command in ``bin_dir`` that runs this checkout's CLI."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "kafkacoord"
    script.write_text(_ENTRY_POINT.format(python=sys.executable))
    script.chmod(0o755)
    return bin_dir


def complete(line: str, bin_dir: Path, env: Mapping[str, str | None] | None = None) -> Completed:
    """What bash offers for ``line`` (a trailing space starts a new, empty word), with
    ``env`` over this process's environment (None: unset)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    script = _BASH.format(words=" ".join(shlex.quote(w) for w in words), cword=len(words) - 1)
    merged = {**os.environ, **(env or {}), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    environ = {k: v for k, v in merged.items() if v is not None}
    started = time.monotonic()
    done = subprocess.run(["bash", "--norc", "-c", script], env=environ, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return Completed([w for w in done.stdout.splitlines() if w], done.stderr, elapsed)
