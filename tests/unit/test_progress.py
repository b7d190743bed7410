"""Progress bars draw on a terminal only: never into a pipe, a file or a JSON answer."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import TextIO

import pytest
from rich.console import Console

from kafkacoord.progress import on_terminal, progress_bar


@pytest.fixture
def terminal() -> Iterator[TextIO]:
    """The writing end of a real pseudo-terminal."""
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as stream:
        try:
            yield stream
        finally:
            os.close(leader)


def test_a_bar_may_draw_on_a_terminal_only_and_never_for_json(terminal: TextIO) -> None:
    assert on_terminal(terminal)
    assert not on_terminal(terminal, json_output=True)
    assert not on_terminal(io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not on_terminal(closed)


def _screen() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=120), buffer


def test_a_bar_that_may_draw_shows_the_count_unit_and_detail() -> None:
    console, screen = _screen()
    with progress_bar(5, "Rebalance p1", enabled=True, unit="partitions",
                      console=console) as bar:  # fmt: skip
        assert bar.drawing
        bar.advance(2)
        bar.update(completed=3, detail="2 in flight")
    drawn = screen.getvalue()
    assert "Rebalance p1" in drawn and "3/5" in drawn and "partitions" in drawn
    assert "2 in flight" in drawn


def test_a_bar_in_bytes_without_a_total_counts_what_arrived() -> None:
    console, screen = _screen()
    with progress_bar(None, "Resolving jars", enabled=True, in_bytes=True,
                      console=console) as bar:  # fmt: skip
        bar.advance(1_500_000)
        bar.update(detail="2 files")
    drawn = screen.getvalue()
    assert "1.5" in drawn and "MB" in drawn and "2 files" in drawn


def test_a_bar_that_may_not_draw_writes_nothing() -> None:
    console, screen = _screen()
    with progress_bar(5, "Resetting offsets", enabled=False, console=console) as bar:
        assert not bar.drawing
        bar.advance(5)
        bar.update(completed=5, detail="done")
    assert screen.getvalue() == ""
