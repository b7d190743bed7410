"""The console's login, sessions and write refusals over real HTTP (waitress on 127.0.0.1).

None of these requests reach the cluster: each is answered (or refused) before a page
reads it, so the console runs here without a broker.
"""

from __future__ import annotations

import http.client
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from kafkacoord.console.app import Console, ConsoleAuth
from kafkacoord.console.auth import LoginLimiter, Sessions, Users, hash_password
from kafkacoord.server.ops.health import Health
from kafkacoord.server.ops.hosts import HostCheck
from kafkacoord.server.ops.http import OpsServer, ops_app

PASSWORDS = {"alice": "wonderland", "bob": "builder"}


@dataclass
class Browser:
    """Keeps the console's cookie and its page's CSRF token, as a browser would."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)
    csrf: str = ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None,
                **headers: str) -> tuple[int, dict[str, str], str]:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        sent = {"Host": f"127.0.0.1:{self.port}", **headers}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode()
            got = {k.lower(): v for k, v in response.getheaders()}
            for raw in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = raw.partition("=")
                value = rest.split(";", 1)[0]
                if "Max-Age=0" in raw:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = value
            found = re.search(r'name="csrf" value="([^"]+)"', text)
            if found:
                self.csrf = found.group(1)
            return response.status, got, text
        finally:
            conn.close()

    def login(self, user: str, password: str, after: str = "/") -> tuple[int, dict[str, str], str]:
        self.request("GET", "/login")
        form = {"csrf": self.csrf, "user": user, "password": password, "next": after}
        return self.request("POST", "/login", form)


def _serve(auth: ConsoleAuth, *, writes: bool = True) -> Iterator[Browser]:
    # No cluster behind it: see the module's docstring.
    console = Console(None, writes=writes, auth=auth)  # type: ignore[arg-type]
    app = ops_app(CollectorRegistry(), lambda: Health(200, {}), lambda: console,
                  HostCheck("127.0.0.1"))  # fmt: skip
    server = OpsServer("127.0.0.1", 0, app).start()
    try:
        # The token every page of this console carries (this one has no page to read).
        yield Browser(server.port, csrf=console.csrf_token)
    finally:
        server.close()


def _auth(login_to_read: bool = True, limiter: LoginLimiter | None = None) -> ConsoleAuth:
    users = Users({name: hash_password(pw) for name, pw in PASSWORDS.items()}, admins=["alice"])
    return ConsoleAuth(users, Sessions(3600), limiter or LoginLimiter(), login_to_read)


@pytest.fixture
def browser() -> Iterator[Browser]:
    yield from _serve(_auth())


def test_reading_needs_a_login_off_loopback(browser: Browser) -> None:
    status, headers, _ = browser.request("GET", "/groups")
    assert status == 303
    assert headers["location"] == "/login?next=%2Fgroups"
    assert browser.request("GET", "/groups/g/lag.json")[0] == 401
    status, _, page = browser.request("GET", "/login?next=%2Fgroups")
    assert status == 200 and 'id="login-form"' in page
    assert browser.request("GET", "/static/console.css")[0] == 200  # the login page's style


def test_a_login_sets_a_strict_http_only_cookie_and_logout_ends_the_session(
    browser: Browser,
) -> None:
    with capture_logs() as logs:
        status, headers, _ = browser.login("alice", "wonderland", after="/topics")
    assert status == 303 and headers["location"] == "/topics"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"kafkacoord_session_{browser.port}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert any(e["event"] == "console login" and e["user"] == "alice" for e in logs)
    status, _, page = browser.request("GET", "/login")
    assert 'id="user">alice<' in page and 'id="logout"' in page
    token = dict(browser.cookies)
    assert browser.request("POST", "/logout", {"csrf": browser.csrf})[0] == 303
    assert not browser.cookies
    # The old cookie, kept by someone, is worth nothing now.
    browser.cookies = token
    assert browser.request("GET", "/groups")[0] == 303


def test_a_wrong_password_is_refused_and_logged(browser: Browser) -> None:
    with capture_logs() as logs:
        status, headers, page = browser.login("alice", "guess")
    assert status == 401 and "set-cookie" not in headers
    assert "wrong user name or password" in page
    assert [e["user"] for e in logs if e["event"] == "console login failed"] == ["alice"]
    assert browser.login("nobody", "wonderland")[0] == 401


def test_failed_logins_are_rate_limited() -> None:
    for browser in _serve(_auth(limiter=LoginLimiter(max_failures=3, window_s=600))):
        for _ in range(3):
            assert browser.login("alice", "guess")[0] == 401
        with capture_logs() as logs:
            status, headers, page = browser.login("alice", "wonderland")
        # Even the right password waits out the window: guesses learn nothing.
        assert status == 429 and int(headers["retry-after"]) > 500
        assert "too many failed logins" in page and not browser.cookies
        assert any(e["event"] == "console login refused: too many failures" for e in logs)


def test_a_login_needs_the_page_token_and_goes_only_to_local_pages(browser: Browser) -> None:
    form = {"user": "alice", "password": "wonderland"}
    assert browser.request("POST", "/login", form)[0] == 403  # no CSRF token
    browser.request("GET", "/login")
    forged = {**form, "csrf": browser.csrf}
    origin = browser.request("POST", "/login", forged, Origin="http://evil.example")
    assert origin[0] == 403 and not browser.cookies
    status, headers, _ = browser.login("alice", "wonderland", after="//evil.example/x")
    assert status == 303 and headers["location"] == "/"


def _write(browser: Browser) -> tuple[int, dict[str, str], str]:
    browser.request("GET", "/login")
    return browser.request("POST", "/rebalance/stop", {"csrf": browser.csrf})


def test_a_write_needs_a_logged_in_admin(browser: Browser) -> None:
    assert _write(browser)[0] == 401  # off loopback, nothing is answered before a login
    assert browser.login("bob", "builder")[0] == 303
    with capture_logs() as logs:
        status, _, page = _write(browser)
    assert status == 403 and "bob is not a console admin" in page
    assert [e["user"] for e in logs if e["event"] == "console write refused"] == ["bob"]


def test_on_loopback_reading_is_open_but_a_write_still_needs_a_login() -> None:
    for browser in _serve(_auth(login_to_read=False)):
        status, _, page = _write(browser)
        assert status == 403 and "log in as a console admin" in page
        status, _, page = browser.request("GET", "/login")
        assert status == 200 and 'id="user"' not in page


def test_a_write_is_refused_while_the_console_is_read_only() -> None:
    for browser in _serve(_auth(), writes=False):
        assert browser.login("alice", "wonderland")[0] == 303
        status, _, page = _write(browser)
        assert status == 403 and "read-only" in page


def test_without_users_nobody_logs_in_or_writes() -> None:
    for browser in _serve(ConsoleAuth(login_to_read=False)):
        status, _, page = browser.request("GET", "/login")
        assert status == 200 and "No console users are configured" in page
        status, _, page = _write(browser)
        assert status == 403 and "console_users" in page
