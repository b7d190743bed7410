"""A daemon's supervisor owns the threads its services start, and a stopped daemon leaves
none of them running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkacoord.server.daemon import Daemon
from kafkacoord.server.settings import Settings

pytestmark = pytest.mark.integration


def test_a_stopped_daemon_leaves_no_thread_of_its_own(
    bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    settings = Settings(node_id=1, bootstrap=bootstrap, topic_prefix=prefix, data_dir=tmp_path,
                        listen="127.0.0.1:0", metrics_port=0, offsets_partitions=2)  # fmt: skip
    daemon = Daemon(settings)
    daemon.start()
    try:
        owned = set(daemon.threads.alive())
        # Started by the services, and by threads those started, yet all its own.
        assert {"controller-standby", "broker-watchdog", "topic-metadata"} <= owned
        assert any(name.endswith("-elect") for name in owned)
        assert {t.name for t in threading.enumerate()} >= owned
    finally:
        daemon.stop()
    assert daemon.threads.alive() == []
    assert not owned & {t.name for t in threading.enumerate()}
