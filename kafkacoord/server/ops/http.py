"""The daemon's HTTP endpoint: ``/metrics`` (Prometheus), ``/health`` (JSON) and the console.

prometheus_client's WSGI app serves ``/metrics`` (content negotiation, gzip); a small
dispatcher adds ``/health`` and hands every other path to the web console, for the
``Host`` names it allows. waitress serves it: a fixed pool of worker threads, a bounded
number of connections, idle connections closed, and a request reaches a worker only
once it has arrived whole and well-formed (a bad or oversized Content-Length is
answered by waitress itself), so a slow or broken client holds no thread.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, make_wsgi_app
from waitress.server import BaseWSGIServer, create_server
from waitress.wasyncore import close_all, loop

from kafkacoord.threads import spawn

from .health import Health
from .hosts import HostCheck

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

_STATUS = {
    200: "200 OK", 404: "404 Not Found", 421: "421 Misdirected Request",
    503: "503 Service Unavailable",
}  # fmt: skip
_OPS_PATHS = ("/metrics", "/health")

# waitress logs each request it refuses (a malformed one, a closed idle connection) at
# INFO and below; the daemon's log keeps its warnings and errors.
logging.getLogger("waitress").setLevel(logging.WARNING)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one ops server may hold: worker threads, open connections, seconds a
    connection may sit idle, and the largest request body and headers."""

    threads: int = 4
    connection_limit: int = 100
    channel_timeout_s: int = 30
    max_body_bytes: int = 64 * 1024
    max_header_bytes: int = 16 * 1024


def ops_app(
    registry: CollectorRegistry,
    health: Callable[[], Health],
    console: Callable[[], WSGIApplication | None] = lambda: None,
    hosts: HostCheck | None = None,
) -> WSGIApplication:
    """``/metrics`` and ``/health``; every other path goes to the web console once
    ``console()`` returns it (it starts after the broker is reached). ``/metrics`` and
    ``/health`` answer under any ``Host`` (scrapers and health checks use many names);
    the rest only under the names ``hosts`` allows."""
    metrics = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/health":
            result = health()
            return _reply(start_response, result.http_status, result.body)
        host = environ.get("HTTP_HOST")
        if hosts is not None and not hosts.allows(host):
            error = (f"this console does not answer to the host {host!r}; add it to "
                     "console_allowed_hosts to serve it")  # fmt: skip
            return _reply(start_response, 421, {"error": error})
        web = console()
        if web is not None:
            return web(environ, start_response)
        if path == "/":
            return _reply(start_response, 200, {"endpoints": list(_OPS_PATHS)})
        return _reply(start_response, 404, {"error": f"no such endpoint: {path}"})

    return app


def _reply(start_response: StartResponse, code: int, body: object) -> list[bytes]:
    data = json.dumps(body, indent=2).encode() + b"\n"
    start_response(
        _STATUS[code],
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


class OpsServer:
    """Serves :func:`ops_app` on ``host:port`` (port 0: any free port) until closed."""

    def __init__(
        self, host: str, port: int, app: WSGIApplication, limits: HttpLimits | None = None
    ) -> None:
        limits = limits or HttpLimits()
        # The server's sockets; one loop thread serves them (a name may bind several).
        self._map: dict[int, Any] = {}
        server = create_server(
            app, map=self._map, host=host, port=port, threads=limits.threads,
            # waitress counts its listening socket and its wake-up pipe among the connections.
            connection_limit=limits.connection_limit + 2,
            channel_timeout=limits.channel_timeout_s,
            # Idle connections are looked for this often (waitress: every 30 s).
            cleanup_interval=max(1, min(30, limits.channel_timeout_s // 2)),
            max_request_body_size=limits.max_body_bytes,
            max_request_header_size=limits.max_header_bytes,
            # No proxy is trusted: REMOTE_ADDR is the peer, whatever the headers say.
            clear_untrusted_proxy_headers=True, ident="kafkacoord", expose_tracebacks=False,
            asyncore_use_poll=True,
        )  # fmt: skip
        self._server = server
        if isinstance(server, BaseWSGIServer):
            self.port: int = int(server.getsockname()[1])
        else:
            self.port = int(server.effective_listen[0][1])
        self.host = host
        self.limits = limits
        self._closing = threading.Event()
        self._thread = spawn("ops-http", self._serve, start=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> OpsServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        # waitress's own run() loops until its sockets are gone; this one also stops when
        # asked, and closes them on the thread that uses them.
        try:
            while not self._closing.is_set() and self._map:
                loop(timeout=0.2, use_poll=True, map=self._map, count=1)
        finally:
            close_all(self._map)

    def close(self) -> None:
        """Stop accepting, close every connection, and let the workers finish."""
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        else:
            close_all(self._map)
        self._server.task_dispatcher.shutdown(timeout=5)


__all__ = ["HttpLimits", "OpsServer", "ops_app"]
