"""The web console: a WSGI app served on the daemon's HTTP port, next to ``/metrics``.

Server-rendered HTML (Jinja2, autoescaped: topic names, group ids and client ids are
user-controlled), htmx for the live refresh and uPlot for the lag chart, both shipped
in the package, so the console works air-gapped. Every write is a POST carrying the
page's CSRF token and a same-origin check, needs a logged-in console admin (auth.py),
goes through the CLI's admin calls under the client id ``kafkacoord-console:<user>``,
and is refused while the console is read-only.
"""

from __future__ import annotations

import hmac
import http.cookies
import json
import mimetypes
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape

from kafkacoord.client.connector import acting_as
from kafkacoord.client.errors import RequestError
from kafkacoord.client.instants import format_instant, parse_instant
from kafkacoord.client.metadata_history import (
    HistoryUnavailableError,
    metadata_as_of,
    partition_history,
)
from kafkacoord.client.offset_reset import RESET_MODES
from kafkacoord.storage.errors import StorageError

from . import pages
from .auth import LoginLimiter, Sessions, Users
from .cluster import ClusterAccess, WritesOffError
from .lag import LagHistory

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = structlog.get_logger(__name__)

__all__ = ["Console", "ConsoleAuth", "ConsoleHttpError"]

_MAX_FORM_BYTES = 64 * 1024
_REASONS = {
    200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
    429: "Too Many Requests", 503: "Service Unavailable",
}  # fmt: skip
_HEADERS = [
    # Scripts and styles only from the console itself: an injected tag would not run.
    ("Content-Security-Policy",
     "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]  # fmt: skip
_ASSETS = resources.files("kafkacoord.console").joinpath("static")
# What the package ships is what is served: no path from a request reaches the disk.
_STATIC = frozenset(f.name for f in _ASSETS.iterdir() if f.is_file())
_READ_ERRORS = (RequestError, StorageError, TimeoutError)
STORED_LAG_GROUPS = 256


CLIENT_ID_PREFIX = "kafkacoord-console:"


class ConsoleHttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class ConsoleAuth:
    """Who may read and write. Without users nobody logs in: reading is open (where
    ``login_to_read`` is false) and nobody writes."""

    users: Users = field(default_factory=lambda: Users({}))
    sessions: Sessions = field(default_factory=lambda: Sessions(8 * 3600))
    limiter: LoginLimiter = field(default_factory=LoginLimiter)
    login_to_read: bool = False


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    environ: WSGIEnvironment
    user: str | None = None

    def form(self) -> dict[str, str]:
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError as exc:
            raise ConsoleHttpError(400, "bad Content-Length") from exc
        if length < 0:
            raise ConsoleHttpError(400, "bad Content-Length")
        if length > _MAX_FORM_BYTES:
            raise ConsoleHttpError(413, "form too large")
        body = self.environ["wsgi.input"].read(length).decode("utf-8", "replace")
        return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def _when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


class Console:
    """The console's WSGI app over a :class:`ClusterAccess`."""

    def __init__(
        self,
        access: ClusterAccess,
        *,
        writes: bool,
        read_only_reason: str = "the console is read-only: set console_writes = true",
        refresh_s: float = 5.0,
        warehouse: Path | None = None,
        auth: ConsoleAuth | None = None,
    ) -> None:
        self.access = access
        self.auth = auth or ConsoleAuth()
        # A views warehouse: /history reads its leadership_history view, the lag charts
        # its lag_history view.
        self.warehouse = warehouse
        self._stored: dict[str, tuple[int, list[tuple[int, int]]]] = {}
        self.writes = writes
        self.read_only_reason = read_only_reason
        self.refresh_s = refresh_s
        # One token per daemon run, embedded in every form: another site can't read it.
        self.csrf_token = secrets.token_urlsafe(32)
        self._env = Environment(
            loader=PackageLoader("kafkacoord.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["when"] = _when
        self._env.filters["pct"] = lambda v: f"{v:.0%}"
        self._env.filters["ids"] = lambda v: ", ".join(str(x) for x in v) or "—"
        self._env.filters["quote"] = lambda v: urllib.parse.quote(str(v), safe="")
        self._routes: list[tuple[str, str, Callable[[_Request, str], tuple[int, str]]]] = [
            ("GET", "/", self._overview),
            ("GET", "/nodes", self._nodes),
            ("GET", "/topics", self._topics),
            ("GET", "/topics/", self._topic),
            ("GET", "/reassignments", self._reassignments),
            ("GET", "/groups", self._groups),
            ("GET", "/groups/", self._group),
            ("GET", "/history", self._history),
            ("POST", "/reassignments/cancel", self._cancel),
            ("POST", "/rebalance/stop", self._stop_rebalance),
            ("POST", "/leaders/elect", self._elect),
            ("POST", "/groups/", self._reset),
        ]

    # -- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        # PEP 3333: PATH_INFO is percent-decoded bytes as latin-1; names are UTF-8.
        raw = environ.get("PATH_INFO", "/") or "/"
        path = raw.encode("latin-1", "replace").decode("utf-8", "replace")
        if path.startswith("/static/"):
            return self._static(path.removeprefix("/static/"), start_response)
        request = _Request(method, path, environ, self.auth.sessions.user(self._token(environ)))
        if path in ("/login", "/logout"):
            return self._session_page(request, start_response)
        if self.auth.login_to_read and request.user is None:
            if method != "GET" or path.endswith("/lag.json"):
                body = b"log in first"
                return self._send(start_response, 401, body, "text/plain; charset=utf-8")
            target = "/login?" + urllib.parse.urlencode({"next": _local(path)})
            return self._send(start_response, 303, b"", "text/plain", [("Location", target)])
        if path.endswith("/lag.json") and path.startswith("/groups/"):
            group = path.removeprefix("/groups/").removesuffix("/lag.json")
            series = pages.lag_series(group, self.access.lag, self._stored_lag(group))
            body = json.dumps(series).encode()
            return self._send(start_response, 200, body, "application/json")
        try:
            status, html = self._dispatch(request)
        except ConsoleHttpError as exc:
            status, html = exc.status, self._error(request, exc)
        return self._send(start_response, status, html.encode(), "text/html; charset=utf-8")

    def _error(self, request: _Request, exc: ConsoleHttpError) -> str:
        return self._render("error.html", request, message=exc.message, status=exc.status)

    # -- login and logout ----------------------------------------------------------------

    def _cookie_name(self, environ: WSGIEnvironment) -> str:
        # Cookies ignore ports: each console on a host (one per daemon) needs its own name.
        try:
            port = urllib.parse.urlsplit(f"//{environ.get('HTTP_HOST', '')}").port
        except ValueError:  # the ops server refuses such a Host before this
            port = None
        return f"kafkacoord_session_{port or environ.get('SERVER_PORT', '80')}"

    def _token(self, environ: WSGIEnvironment) -> str | None:
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(environ.get("HTTP_COOKIE", ""))
        except http.cookies.CookieError:
            return None
        morsel = jar.get(self._cookie_name(environ))
        return None if morsel is None else morsel.value

    def _cookie(self, environ: WSGIEnvironment, token: str, max_age: int) -> tuple[str, str]:
        attributes = f"Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict"
        if environ.get("wsgi.url_scheme") == "https":
            attributes += "; Secure"
        return "Set-Cookie", f"{self._cookie_name(environ)}={token}; {attributes}"

    def _session_page(self, request: _Request, start_response: StartResponse) -> list[bytes]:
        environ = request.environ
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        after = _local(query.get("next", ["/"])[-1])
        headers: list[tuple[str, str]] = []
        try:
            if request.path == "/logout":
                if request.method != "POST":
                    raise ConsoleHttpError(405, f"{request.method} is not allowed here")
                self._checked_origin(request, request.form())
                self.auth.sessions.end(self._token(environ))
                if request.user is not None:
                    log.info("console logout", user=request.user)
                headers.append(self._cookie(environ, "", 0))
                return self._send(start_response, 303, b"", "text/plain",
                                  [*headers, ("Location", "/")])  # fmt: skip
            if request.method == "GET":
                status, html = 200, self._login_page(request, after)
            elif request.method == "POST":
                form = request.form()
                self._checked_origin(request, form)
                after = _local(form.get("next", "/"))
                token, wait = self._login(request, form)
                if token is not None:
                    headers.append(self._cookie(environ, token,
                                                int(self.auth.sessions.max_age_s)))  # fmt: skip
                    return self._send(start_response, 303, b"", "text/plain",
                                      [*headers, ("Location", after)])  # fmt: skip
                if wait > 0:
                    headers.append(("Retry-After", str(int(wait) + 1)))
                    message = "too many failed logins: try again later"
                    status, html = 429, self._login_page(request, after, error=message)
                else:
                    message = "wrong user name or password"
                    status, html = 401, self._login_page(request, after, error=message)
            else:
                raise ConsoleHttpError(405, f"{request.method} is not allowed here")
        except ConsoleHttpError as exc:
            status, html = exc.status, self._error(request, exc)
        return self._send(start_response, status, html.encode(), "text/html; charset=utf-8",
                          headers)  # fmt: skip

    def _login_page(self, request: _Request, after: str, error: str | None = None) -> str:
        users = bool(self.auth.users)
        return self._render("login.html", request, next=after, login_error=error, users=users)

    def _login(self, request: _Request, form: dict[str, str]) -> tuple[str | None, float]:
        """A new session's token, or None and how long until a login is checked again."""
        name, password = form.get("user", ""), form.get("password", "")
        client = str(request.environ.get("REMOTE_ADDR", "?"))
        keys = (f"client:{client}", f"user:{name}")
        wait = self.auth.limiter.retry_after(keys)
        if wait > 0:
            log.warning("console login refused: too many failures", user=name, client=client,
                        retry_after_s=round(wait))  # fmt: skip
            return None, wait
        if not self.auth.users.verify(name, password):
            self.auth.limiter.failed(keys)
            log.warning("console login failed", user=name, client=client)
            return None, 0.0
        self.auth.limiter.succeeded([f"user:{name}"])
        log.info("console login", user=name, client=client, admin=self.auth.users.is_admin(name))
        return self.auth.sessions.create(name), 0.0

    def _stored_lag(self, group: str) -> list[tuple[int, int]]:
        """The group's lag older than the ring, from the views warehouse ([] without one);
        read again only when the warehouse has a new version."""
        if self.warehouse is None:
            return []
        try:
            version = pages.warehouse_version(self.warehouse)
            cached = self._stored.get(group)
            if cached is not None and cached[0] == version:
                return cached[1]
            points = pages.warehouse_lag(self.warehouse, group)
        except Exception as exc:  # no pyarrow, no warehouse yet, an unreadable manifest
            log.warning("views warehouse unreadable; lag chart from the ring only",
                        error=str(exc))  # fmt: skip
            return []
        if len(self._stored) >= STORED_LAG_GROUPS:
            self._stored.clear()  # bounded: a crawler must not grow it without end
        self._stored[group] = (version, points)
        return points

    def _dispatch(self, request: _Request) -> tuple[int, str]:
        # A user's requests name them to the daemons (the listener's log, the audit).
        user = request.user
        with acting_as(CLIENT_ID_PREFIX + user) if user else nullcontext():
            try:
                return self._route(request)
            except WritesOffError as exc:
                raise ConsoleHttpError(403, str(exc)) from exc

    def _route(self, request: _Request) -> tuple[int, str]:
        allowed = False
        for method, prefix, handler in self._routes:
            exact = not prefix.endswith("/") or prefix == "/"
            matches = request.path == prefix if exact else (
                request.path.startswith(prefix) and len(request.path) > len(prefix)
            )  # fmt: skip
            if not matches:
                continue
            allowed = True
            if method == request.method:
                rest = "" if exact else request.path[len(prefix) :]
                return handler(request, rest)
        if allowed:
            raise ConsoleHttpError(405, f"{request.method} is not allowed here")
        raise ConsoleHttpError(404, f"no such page: {request.path}")

    def _send(
        self,
        start_response: StartResponse,
        status: int,
        body: bytes,
        content_type: str,
        extra: list[tuple[str, str]] = [],  # noqa: B006 - never mutated
    ) -> list[bytes]:
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *_HEADERS,
                   *extra]  # fmt: skip
        start_response(f"{status} {_REASONS.get(status, 'Error')}", headers)
        return [body]

    def _static(self, name: str, start_response: StartResponse) -> list[bytes]:
        if name not in _STATIC:
            return self._send(start_response, 404, b"not found", "text/plain")
        data = _ASSETS.joinpath(name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "text/plain"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        return self._send(start_response, 200, data, kind)

    def _write_refusal(self, user: str | None) -> str | None:
        """Why this user may not write, or None."""
        if not self.writes:
            return self.read_only_reason
        if user is None:
            if not self.auth.users:
                return "writes need a console admin: set console_users and console_admins"
            return "log in as a console admin to write"
        if not self.auth.users.is_admin(user):
            return f"{user} is not a console admin (console_admins)"
        return None

    def _render(self, template: str, request: _Request, **context: Any) -> str:
        refusal = self._write_refusal(request.user)
        return self._env.get_template(template).render(
            path=request.path, csrf=self.csrf_token, writes=refusal is None,
            read_only_reason=refusal or "", refresh_s=self.refresh_s, user=request.user,
            logins=bool(self.auth.users), **context,
        )  # fmt: skip

    # -- pages ---------------------------------------------------------------------------

    def _listed(self) -> tuple[dict[str, tuple[str, str]] | None, str | None]:
        try:
            groups = self.access.list_groups()
        except _READ_ERRORS as exc:
            return None, f"groups unavailable: {exc}"
        return {grp.group_id: (grp.state, grp.protocol_type) for grp in groups}, None

    def _overview(self, request: _Request, _: str) -> tuple[int, str]:
        listed, error = self._listed()
        states = None if listed is None else {g: s for g, (s, _) in listed.items()}
        offsets = self.access.topics.offsets
        page = self.access.metadata.read(lambda t: pages.overview_page(t, offsets, states))
        return 200, self._render("overview.html", request, page=page, error=error)

    def _nodes(self, request: _Request, _: str) -> tuple[int, str]:
        rows = self.access.metadata.read(pages.nodes_page)
        return 200, self._render("nodes.html", request, rows=rows)

    def _topics(self, request: _Request, _: str) -> tuple[int, str]:
        rows = self.access.metadata.read(pages.topics_page)
        return 200, self._render("topics.html", request, rows=rows)

    def _topic(self, request: _Request, rest: str) -> tuple[int, str]:
        topic, slash, partition = rest.rpartition("/")
        if slash and partition.isdigit():  # a topic name has no "/": /topics/T/P
            return self._partition(request, topic, int(partition))
        name = rest
        as_of = _query(request, "as_of")
        if not as_of:
            page = self.access.metadata.read(lambda t: pages.topic_page(t, name))
            if page is None:
                raise ConsoleHttpError(404, f"topic {name!r} does not exist")
            return 200, self._render("topic.html", request, page=page)
        now_ms = int(time.time() * 1000)
        try:
            instant = parse_instant(as_of, now_ms)
            image = metadata_as_of(self.access.bootstrap, self.access.topics, instant, now_ms)
        except ValueError as exc:
            raise ConsoleHttpError(400, f"as of: {exc}") from exc
        except HistoryUnavailableError as exc:
            raise ConsoleHttpError(404, str(exc)) from exc
        page, when = pages.topic_page_of(image, name), format_instant(instant)
        if page is None:
            raise ConsoleHttpError(404, f"topic {name!r} did not exist at {when}")
        return 200, self._render("topic.html", request, page=page, as_of=when, as_of_text=as_of)

    def _partition(self, request: _Request, name: str, partition: int) -> tuple[int, str]:
        """A partition's decisions, each with its cause, from the metadata log."""
        steps = pages.partition_timeline(
            partition_history(self.access.bootstrap, self.access.topics, name, partition)
        )
        if not steps:
            raise ConsoleHttpError(404, f"partition {name}-{partition} has no record")
        return 200, self._render("partition.html", request, name=name, partition=partition,
                                 steps=steps)  # fmt: skip

    def _reassignments(self, request: _Request, _: str, **extra: Any) -> tuple[int, str]:
        page = self.access.metadata.read(pages.reassignments_page)
        return 200, self._render("reassignments.html", request, page=page, **extra)

    def _history(self, request: _Request, _: str) -> tuple[int, str]:
        notice = None
        if self.warehouse is not None:
            try:
                rows = pages.warehouse_history(self.warehouse)
            except Exception as exc:  # no pyarrow, no warehouse yet, an unreadable manifest
                notice = f"views warehouse unreadable ({exc}); replayed from the metadata log"
            else:
                if rows:
                    source = f"the leadership_history view of {self.warehouse}"
                    return 200, self._render("history.html", request, rows=rows, source=source)
                # A warehouse the view job has not filled yet: the log has the history.
        rows = self.access.metadata.read(pages.history_page)
        return 200, self._render("history.html", request, rows=rows, error=notice)

    def _groups(self, request: _Request, _: str) -> tuple[int, str]:
        listed, error = self._listed()
        rows = pages.groups_page(listed or {}, self.access.lag)
        return 200, self._render("groups.html", request, rows=rows, error=error)

    def _group(self, request: _Request, group: str, **extra: Any) -> tuple[int, str]:
        as_of = _query(request, "as_of")
        if as_of:
            return self._group_as_of(request, group, as_of)
        try:
            view = self.access.group(group)
        except _READ_ERRORS as exc:
            raise ConsoleHttpError(503, f"group {group!r} unavailable: {exc}") from exc
        if view is None:
            raise ConsoleHttpError(404, f"group {group!r} does not exist")
        page = pages.group_page(view, self.access.lag)
        topics = sorted({o["topic"] for o in page["offsets"]})
        return 200, self._render("group.html", request, page=page, topics=topics,
                                 modes=RESET_MODES, warehouse=self.warehouse, **extra)  # fmt: skip

    def _group_as_of(self, request: _Request, group: str, as_of: str) -> tuple[int, str]:
        """The group as of an instant, replayed from its shard of the offsets log: no
        lag status (the samples are of now) and no actions (they change the present)."""
        now_ms = int(time.time() * 1000)
        try:
            instant = parse_instant(as_of, now_ms)
            view = self.access.group_as_of(group, instant, now_ms)
        except ValueError as exc:
            raise ConsoleHttpError(400, f"as of: {exc}") from exc
        except HistoryUnavailableError as exc:
            raise ConsoleHttpError(404, str(exc)) from exc
        except _READ_ERRORS as exc:
            raise ConsoleHttpError(503, f"group {group!r} unavailable: {exc}") from exc
        when = format_instant(instant)
        if view is None:
            raise ConsoleHttpError(404, f"group {group!r} did not exist at {when}")
        page = pages.group_page(view, LagHistory())
        return 200, self._render("group.html", request, page=page, topics=[], modes=RESET_MODES,
                                 warehouse=self.warehouse, as_of=when,
                                 as_of_text=as_of)  # fmt: skip

    # -- writes --------------------------------------------------------------------------

    def _checked_origin(self, request: _Request, form: dict[str, str]) -> None:
        """A form posted by one of this console's pages: right token, same origin."""
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf_token):
            raise ConsoleHttpError(403, "missing or wrong CSRF token: reload the page")
        origin = request.environ.get("HTTP_ORIGIN")
        host = request.environ.get("HTTP_HOST", "")
        if origin and urllib.parse.urlsplit(origin).netloc != host:
            raise ConsoleHttpError(403, f"cross-origin write from {origin} refused")

    def _checked_form(self, request: _Request) -> dict[str, str]:
        """The form of an allowed write: right token, same origin, writes enabled, and a
        logged-in console admin."""
        form = request.form()
        self._checked_origin(request, form)
        refusal = self._write_refusal(request.user)
        if refusal is not None:
            log.warning("console write refused", user=request.user, path=request.path,
                        client=request.environ.get("REMOTE_ADDR"), reason=refusal)  # fmt: skip
            raise ConsoleHttpError(403, refusal)
        return form

    def _audit(self, request: _Request, action: str, **details: Any) -> None:
        """The audit line of a write: who did what."""
        log.info("console write", action=action, user=request.user,
                 client=request.environ.get("REMOTE_ADDR"), **details)  # fmt: skip

    def _cancel(self, request: _Request, _: str) -> tuple[int, str]:
        form = self._checked_form(request)
        partition = _int(form.get("partition", ""), "partition")
        tp = (form.get("topic", ""), partition)
        try:
            errors = self.access.cancel_reassignments([tp])
        except RequestError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        self._audit(request, "cancel-reassignment", topic=tp[0], partition=tp[1])
        notice = f"{tp[0]}-{tp[1]}: " + (errors.get(tp) or "reassignment stopped")
        return self._reassignments(request, "", notice=notice)

    def _stop_rebalance(self, request: _Request, _: str) -> tuple[int, str]:
        self._checked_form(request)
        try:
            state = self.access.stop_rebalance()
        except RequestError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        self._audit(request, "stop-rebalance", state=state)
        notice = f"rebalance {state.lower()}: queued moves cancelled, moves in flight finish"
        return self._reassignments(request, "", notice=notice)

    def _elect(self, request: _Request, _: str) -> tuple[int, str]:
        form = self._checked_form(request)
        topic = form.get("topic") or None
        partitions = None
        if topic is not None:
            ids = self.access.metadata.read(lambda t: sorted(t.image.partition_ids(topic)))
            partitions = [(topic, p) for p in ids]
        try:
            errors = self.access.elect_preferred(partitions)
        except RequestError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        self._audit(request, "elect-preferred-leaders", topic=topic, failed=len(errors))
        notice = "preferred leaders elected" + (
            "; failed: " + ", ".join(f"{t}-{p} ({e})" for (t, p), e in sorted(errors.items()))
            if errors else ""
        )  # fmt: skip
        if topic is None:
            return self._reassignments(request, "", notice=notice)
        page = self.access.metadata.read(lambda t: pages.topic_page(t, topic))
        return 200, self._render("topic.html", request, page=page, notice=notice)

    def _reset(self, request: _Request, rest: str) -> tuple[int, str]:
        group, _, action = rest.rpartition("/")
        if action != "reset-offsets" or not group:
            raise ConsoleHttpError(404, f"no such action: {rest}")
        form = self._checked_form(request)
        mode = form.get("mode", "")
        if mode not in RESET_MODES:
            raise ConsoleHttpError(400, f"mode must be one of {', '.join(RESET_MODES)}")
        value = _int(form.get("value") or "0", "value")
        apply = form.get("apply") == "1"
        try:
            result = self.access.reset_offsets(group, form.get("topic") or None, mode, value,
                                               apply=apply)  # fmt: skip
        except ValueError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        except _READ_ERRORS as exc:
            raise ConsoleHttpError(503, str(exc)) from exc
        if apply:
            self._audit(
                request,
                "reset-offsets",
                group=group,
                topic=form.get("topic") or None,
                mode=mode,
                value=value,
                errors=len(result.errors),
            )
        return self._group(request, group, reset=result, reset_form=form)


def _query(request: _Request, name: str) -> str:
    values = urllib.parse.parse_qs(str(request.environ.get("QUERY_STRING", ""))).get(name, [""])
    return values[-1].strip()


def _local(target: str) -> str:
    """A path on this console to go to after a login; anything else goes to /."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise ConsoleHttpError(400, f"{name} must be an integer, not {text!r}") from exc
