"""One view job per local checkpoint, and the checkpoint file manager a local one gets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkacoord.spark.checkpoint_lock import CheckpointInUseError, CheckpointLock
from kafkacoord.spark.run import CHECKPOINT_MANAGER, LOCAL_CHECKPOINT_MANAGER, RunConfig

HOLD = """
import sys, time
from pathlib import Path
from kafkacoord.spark.checkpoint_lock import CheckpointLock
CheckpointLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    first, second = CheckpointLock(tmp_path / "cp"), CheckpointLock(tmp_path / "cp")
    first.acquire()
    with pytest.raises(CheckpointInUseError, match=str(tmp_path / "cp")):
        second.acquire()
    assert first.held and not second.held
    first.release()
    second.acquire()
    assert second.held
    second.release()


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointInUseError):
            CheckpointLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait(30)
    lock = CheckpointLock(tmp_path)
    lock.acquire()
    assert lock.held
    lock.release()


def test_only_a_local_checkpoint_gets_the_file_system_manager(tmp_path: Path) -> None:
    local = RunConfig("127.0.0.1:9", tmp_path)
    assert local.checkpoint_sql_conf() == {CHECKPOINT_MANAGER: LOCAL_CHECKPOINT_MANAGER}
    as_uri = RunConfig("127.0.0.1:9", tmp_path, checkpoint=f"file://{tmp_path}/cp")
    assert as_uri.checkpoint_sql_conf() == {CHECKPOINT_MANAGER: LOCAL_CHECKPOINT_MANAGER}
    for remote in ("hdfs://nn:8020/cp", "s3a://bucket/cp"):
        assert RunConfig("127.0.0.1:9", tmp_path, checkpoint=remote).checkpoint_sql_conf() == {}
