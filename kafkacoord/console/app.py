"""The web console: a WSGI app served on the daemon's HTTP port, next to ``/metrics``.

Server-rendered HTML (Jinja2, autoescaped: topic names, group ids and client ids are
user-controlled), htmx for the live refresh and uPlot for the lag chart, both shipped
in the package, so the console works air-gapped. Every write is a POST carrying the
page's CSRF token and a same-origin check, goes through the CLI's admin calls, and is
refused while the console is read-only.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import secrets
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape

from kafkacoord.client.errors import RequestError
from kafkacoord.client.offset_reset import RESET_MODES
from kafkacoord.storage.errors import StorageError

from . import pages
from .cluster import ClusterAccess

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = structlog.get_logger(__name__)

__all__ = ["Console", "ConsoleHttpError"]

_MAX_FORM_BYTES = 64 * 1024
_REASONS = {
    200: "OK", 303: "See Other", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 413: "Payload Too Large", 503: "Service Unavailable",
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


class ConsoleHttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    environ: WSGIEnvironment

    def form(self) -> dict[str, str]:
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError as exc:
            raise ConsoleHttpError(400, "bad Content-Length") from exc
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
    ) -> None:
        self.access = access
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
        if path.endswith("/lag.json") and path.startswith("/groups/"):
            group = path.removeprefix("/groups/").removesuffix("/lag.json")
            series = pages.lag_series(group, self.access.lag, self._stored_lag(group))
            body = json.dumps(series).encode()
            return self._send(start_response, 200, body, "application/json")
        request = _Request(method, path, environ)
        try:
            status, html = self._dispatch(request)
        except ConsoleHttpError as exc:
            status, html = exc.status, self._render("error.html", request, message=exc.message,
                                                    status=exc.status)  # fmt: skip
        return self._send(start_response, status, html.encode(), "text/html; charset=utf-8")

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
        self, start_response: StartResponse, status: int, body: bytes, content_type: str
    ) -> list[bytes]:
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *_HEADERS]
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

    def _render(self, template: str, request: _Request, **context: Any) -> str:
        return self._env.get_template(template).render(
            path=request.path, csrf=self.csrf_token, writes=self.writes,
            read_only_reason=self.read_only_reason, refresh_s=self.refresh_s, **context,
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

    def _topic(self, request: _Request, name: str) -> tuple[int, str]:
        page = self.access.metadata.read(lambda t: pages.topic_page(t, name))
        if page is None:
            raise ConsoleHttpError(404, f"topic {name!r} does not exist")
        return 200, self._render("topic.html", request, page=page)

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

    # -- writes --------------------------------------------------------------------------

    def _checked_form(self, request: _Request) -> dict[str, str]:
        """The form of an allowed write: right token, same origin, writes enabled."""
        form = request.form()
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf_token):
            raise ConsoleHttpError(403, "missing or wrong CSRF token: reload the page")
        origin = request.environ.get("HTTP_ORIGIN")
        host = request.environ.get("HTTP_HOST", "")
        if origin and urllib.parse.urlsplit(origin).netloc != host:
            raise ConsoleHttpError(403, f"cross-origin write from {origin} refused")
        if not self.writes:
            raise ConsoleHttpError(403, self.read_only_reason)
        return form

    def _cancel(self, request: _Request, _: str) -> tuple[int, str]:
        form = self._checked_form(request)
        partition = _int(form.get("partition", ""), "partition")
        tp = (form.get("topic", ""), partition)
        try:
            errors = self.access.cancel_reassignments([tp])
        except RequestError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        log.info("console cancelled a reassignment", topic=tp[0], partition=tp[1])
        notice = f"{tp[0]}-{tp[1]}: " + (errors.get(tp) or "reassignment stopped")
        return self._reassignments(request, "", notice=notice)

    def _stop_rebalance(self, request: _Request, _: str) -> tuple[int, str]:
        self._checked_form(request)
        try:
            state = self.access.stop_rebalance()
        except RequestError as exc:
            raise ConsoleHttpError(400, str(exc)) from exc
        log.info("console stopped the rebalance", state=state)
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
        log.info("console elected preferred leaders", topic=topic)
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
            log.info("console reset offsets", group=group, mode=mode, errors=len(result.errors))
        return self._group(request, group, reset=result, reset_form=form)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise ConsoleHttpError(400, f"{name} must be an integer, not {text!r}") from exc
