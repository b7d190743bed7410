"""Progress bars on a terminal, and nothing anywhere else.

A bar draws only where someone watches: on a terminal, never into a pipe, a file, a
log or a JSON answer. Callers say whether it may draw (:func:`on_terminal`); a bar that
may not is a no-op, so the work around it reads the same either way::

    with progress_bar(len(plan), "Resetting offsets", enabled=on_terminal()) as bar:
        for chunk in chunks:
            reset(chunk)
            bar.advance(len(chunk))
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    FileSizeColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def on_terminal(stream: TextIO | None = None, *, json_output: bool = False) -> bool:
    """Whether a bar may draw on ``stream`` (stdout by default): never for a JSON
    answer, and only on a terminal."""
    if json_output:
        return False
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Bar:
    """One task's progress; every method is a no-op on a bar that may not draw."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task

    @property
    def drawing(self) -> bool:
        return self._progress is not None

    def advance(self, amount: float = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def update(
        self, *, completed: float | None = None, total: float | None = None, detail: str = ""
    ) -> None:
        """Set what is done (and the total, once known); ``detail`` follows the count."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=completed, total=total, detail=detail)


@contextlib.contextmanager
def progress_bar(
    total: float | None,
    description: str,
    *,
    enabled: bool,
    unit: str = "",
    in_bytes: bool = False,
    console: Console | None = None,
) -> Iterator[Bar]:
    """A bar over ``total`` steps (None: not known yet), with the estimated time left.

    ``unit`` names what is counted ("partitions"); ``in_bytes`` counts bytes (sizes
    instead of a count). Draws on ``console`` (stdout's by default) only if ``enabled``.
    """
    if not enabled:
        yield Bar()
        return
    # With no total yet a spinner shows it is alive, and the time so far stands in for
    # the time left.
    columns: list[ProgressColumn] = [
        *([SpinnerColumn()] if total is None else []),
        TextColumn("{task.description}"),
        BarColumn(),
        _count(total, in_bytes),
        *([TextColumn(unit)] if unit else []),
        TimeElapsedColumn() if total is None else TimeRemainingColumn(),
        TextColumn("{task.fields[detail]}"),
    ]
    with Progress(*columns, console=console or Console()) as progress:
        task = progress.add_task(description, total=total, detail="")
        yield Bar(progress, task)


def _count(total: float | None, in_bytes: bool) -> ProgressColumn:
    if not in_bytes:
        return MofNCompleteColumn()
    return FileSizeColumn() if total is None else DownloadColumn()
