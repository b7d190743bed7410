"""The console behind its login on a real daemon (embedded broker): an admin's write is
audited under the user's name, and under mutual TLS it reaches the listener with the
console's own certificate and a client id naming the user."""

from __future__ import annotations

import http.client
import re
import urllib.parse
from pathlib import Path

import pytest
import trustme

from kafkacoord.console.auth import hash_password
from tests.integration.cluster import DaemonProcess
from tests.pki import write_pki

pytestmark = pytest.mark.integration

USERS = (
    '{"alice": "' + hash_password("wonderland") + '", "bob": "' + hash_password("builder") + '"}'
)


class Session:
    """One browser's cookie and page token on a console."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or 80
        self.cookie = ""
        self.csrf = ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None
                ) -> tuple[int, dict[str, str], str]:  # fmt: skip
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        headers = {"Cookie": self.cookie} if self.cookie else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
            got = {k.lower(): v for k, v in response.getheaders()}
            if "set-cookie" in got:
                self.cookie = got["set-cookie"].split(";", 1)[0]
            found = re.search(r'name="csrf" value="([^"]+)"', text)
            if found:
                self.csrf = found.group(1)
            return response.status, got, text
        finally:
            conn.close()

    def login(self, user: str, password: str) -> int:
        self.request("GET", "/login")
        form = {"csrf": self.csrf, "user": user, "password": password, "next": "/"}
        return self.request("POST", "/login", form)[0]

    def elect(self) -> tuple[int, str]:
        self.request("GET", "/reassignments")
        status, _, page = self.request("POST", "/leaders/elect", {"csrf": self.csrf})
        return status, page


def _daemon(tmp: Path, **extra: str) -> DaemonProcess:
    return DaemonProcess({
        "KAFKACOORD_DATA_DIR": str(tmp),
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_OFFSETS_PARTITIONS": "2",
        "KAFKACOORD_CONSOLE_WRITES": "true",
        "KAFKACOORD_CONSOLE_USERS": USERS,
        "KAFKACOORD_CONSOLE_ADMINS": '["alice"]',
        **extra,
    })  # fmt: skip


@pytest.fixture
def daemon_dir(tmp_path: Path) -> Path:
    return tmp_path


def _ready(daemon: DaemonProcess) -> Session:
    return Session(daemon.wait_for("console ready", timeout_s=120)["url"])


def test_an_admins_write_is_audited_under_the_users_name(daemon_dir: Path) -> None:
    daemon = _daemon(daemon_dir)
    try:
        console = _ready(daemon)
        status, page = console.elect()
        assert status == 403 and "log in as a console admin" in page
        assert console.login("bob", "builder") == 303
        assert console.elect()[0] == 403
        assert console.login("alice", "wonderland") == 303
        status, page = console.elect()
        assert status == 200 and "preferred leaders elected" in page
        audit = daemon.wait_for("console write", action="elect-preferred-leaders")
        assert audit["user"] == "alice" and audit["client"] == "127.0.0.1"
        # The listener's own audit line names the console user in the client id.
        call = daemon.wait_for("admin call", api="ElectLeaders")
        assert call["client"] == "kafkacoord-console:alice"
        refused = [e for e in daemon.events if e.get("event") == "console write refused"]
        assert [e["user"] for e in refused] == [None, "bob"]
    finally:
        daemon.stop()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, str]:
    ca = trustme.CA()
    files = write_pki(tmp_path, ca, {
        "daemon": ca.issue_cert("127.0.0.1", "localhost", common_name="daemon"),
        "console": ca.issue_cert("console.example", common_name="console"),
    })  # fmt: skip
    return {k: str(v) for k, v in files.items()}


def test_under_mutual_tls_the_console_writes_with_its_own_certificate(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    mutual = {
        "KAFKACOORD_TLS_CERT": pki["daemon"], "KAFKACOORD_TLS_KEY": pki["daemon-key"],
        "KAFKACOORD_TLS_CA": pki["ca"], "KAFKACOORD_TLS_CLIENT_CA": pki["ca"],
        # Only the daemon's own subject: the console's write must be refused, and the
        # refusal shows whose certificate and which client id it came with.
        "KAFKACOORD_ADMIN_PRINCIPALS": '["CN=daemon"]',
    }  # fmt: skip
    without = _daemon(tmp_path / "without", **mutual)
    try:
        console = _ready(without)
        assert console.login("alice", "wonderland") == 303
        status, page = console.elect()
        assert status == 403 and "console_tls_cert" in page
        assert not without.has("call refused")  # nothing was sent
    finally:
        without.stop()
    own = _daemon(tmp_path / "own", **mutual, KAFKACOORD_CONSOLE_TLS_CERT=pki["console"],
                  KAFKACOORD_CONSOLE_TLS_KEY=pki["console-key"])  # fmt: skip
    try:
        console = _ready(own)
        assert console.login("alice", "wonderland") == 303
        status, page = console.elect()
        assert status == 400 and "not in admin_principals" in page
        refused = own.wait_for("call refused", api="ElectLeaders")
        assert refused["principal"].startswith("CN=console,")  # not the daemon's
        assert refused["client"] == "kafkacoord-console:alice"
    finally:
        own.stop()
