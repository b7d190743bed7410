"""A view job refuses a checkpoint folded for other tables, with what to do instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkacoord.spark.fold_layout import (
    LAYOUT_FILE,
    FoldLayoutError,
    check_fold_layout,
    fold_layout,
)


def test_a_new_checkpoint_is_marked_and_accepted_again(tmp_path: Path) -> None:
    checkpoint = tmp_path / "wh" / "_checkpoints" / "fold"
    check_fold_layout(str(checkpoint), tmp_path / "wh")
    assert (checkpoint / LAYOUT_FILE).read_text().strip() == fold_layout()
    assert "consumer_group_assignments" in fold_layout()
    (checkpoint / "offsets").mkdir()  # Spark has started writing it
    check_fold_layout(str(checkpoint), tmp_path / "wh")


def test_an_older_checkpoint_stops_the_job_with_a_clear_error(tmp_path: Path) -> None:
    checkpoint = tmp_path / "fold"
    (checkpoint / "offsets").mkdir(parents=True)  # written before layouts were marked
    with pytest.raises(FoldLayoutError, match="delete the checkpoint and the warehouse"):
        check_fold_layout(str(checkpoint), tmp_path)
    (checkpoint / LAYOUT_FILE).write_text("controller,nodes\n")
    with pytest.raises(FoldLayoutError, match="holds the layout controller,nodes"):
        check_fold_layout(f"file://{checkpoint}", tmp_path)


def test_a_remote_checkpoint_is_left_to_spark(tmp_path: Path) -> None:
    check_fold_layout("hdfs://namenode/warehouse/_checkpoints/fold", tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_connector_checkpoint_of_the_stateful_fence_stops_the_job(tmp_path: Path) -> None:
    """Its state has an operator more than the job: Spark would read the fence's state
    as the fold's."""
    checkpoint = tmp_path / "fold"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / LAYOUT_FILE).write_text(fold_layout() + "\n")  # the tables alone
    check_fold_layout(str(checkpoint), tmp_path)  # the Python source's: unchanged
    with pytest.raises(FoldLayoutError, match="delete the checkpoint and the warehouse"):
        check_fold_layout(str(checkpoint), tmp_path, connector=True)
    fresh = tmp_path / "new"
    check_fold_layout(str(fresh), tmp_path, connector=True)
    (fresh / "offsets").mkdir()
    check_fold_layout(str(fresh), tmp_path, connector=True)
    with pytest.raises(FoldLayoutError):
        check_fold_layout(str(fresh), tmp_path)  # a source's checkpoint is its own
