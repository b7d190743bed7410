"""A daemon on the embedded broker and a real Chromium, for the console's browser tests.

Debian's Chromium (``apt-get install chromium``) is driven by Playwright through
``executable_path``: Playwright's own browser download cannot run here. Without a
Chromium the tests skip, except where ``KAFKACOORD_UI_REQUIRED=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkacoord.console.auth import hash_password
from tests.integration.cluster import DaemonProcess

ARTIFACTS = Path(__file__).parent / "artifacts"
# The console's users: alice may write, bob only reads.
PASSWORDS = {"alice": "wonderland", "bob": "builder"}
# A name that resolves to 127.0.0.1 in the browser alone: a DNS-rebinding site.
REBOUND = "rebound.example"


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        message = "no Chromium: apt-get install chromium"
        if os.environ.get("KAFKACOORD_UI_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Root in a container has no user namespace for Chromium's sandbox.
        launched = playwright.chromium.launch(
            executable_path=path,
            args=["--no-sandbox", f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"],
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def console_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    data = tmp_path_factory.mktemp("console-daemon")
    daemon = DaemonProcess({
        "KAFKACOORD_DATA_DIR": str(data),
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_OFFSETS_PARTITIONS": "4",
        "KAFKACOORD_CONSOLE_WRITES": "true",
        "KAFKACOORD_CONSOLE_USERS": json.dumps({u: hash_password(p) for u, p in PASSWORDS.items()}),
        "KAFKACOORD_CONSOLE_ADMINS": '["alice"]',
        "KAFKACOORD_CONSOLE_LAG_INTERVAL_MS": "300",
        "KAFKACOORD_CONSOLE_WAREHOUSE": str(data / "views"),
        "KAFKACOORD_NODE_SESSION_TIMEOUT_MS": "60000",
    })  # fmt: skip
    try:
        daemon.wait_for("console ready", timeout_s=120)
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
