"""One view job per local checkpoint: an advisory lock held for the job's life.

Two jobs on one checkpoint would write the same batch ids, each over the other. The
lock refuses the second at its start, with the checkpoint named, rather than leave it
to the checkpoint's rename to fail some batches later (and only with the manager
that refuses to rename over a file: see ``RunConfig.checkpoint_sql_conf``). The
kernel drops the lock with the process, so a killed job leaves none behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Final

LOCK_FILE: Final = ".kafkacoord-job.lock"


class CheckpointInUseError(RuntimeError):
    """Another view job holds the checkpoint."""


class CheckpointLock:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None

    def acquire(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CheckpointInUseError(
                f"another view job runs on the checkpoint {self.directory}: one job per "
                "checkpoint (stop it, or give this one a checkpoint of its own)"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None
