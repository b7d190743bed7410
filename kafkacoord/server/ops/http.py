"""The daemon's HTTP endpoint: ``/metrics`` (Prometheus), ``/health`` (JSON) and the console.

prometheus_client's WSGI app serves ``/metrics`` (content negotiation, gzip); a small
dispatcher adds ``/health`` and hands every other path to the web console. wsgiref's
server, one thread per request, on a daemon thread of its own.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from kafkacoord.threads import spawn

from .health import Health

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

_STATUS = {200: "200 OK", 404: "404 Not Found", 503: "503 Service Unavailable"}


def ops_app(
    registry: CollectorRegistry,
    health: Callable[[], Health],
    console: Callable[[], WSGIApplication | None] = lambda: None,
) -> WSGIApplication:
    """``/metrics`` and ``/health``; every other path goes to the web console once
    ``console()`` returns it (it starts after the broker is reached)."""
    metrics = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/health":
            result = health()
            return _reply(start_response, result.http_status, result.body)
        web = console()
        if web is not None:
            return web(environ, start_response)
        if path == "/":
            return _reply(start_response, 200, {"endpoints": ["/metrics", "/health"]})
        return _reply(start_response, 404, {"error": f"no such endpoint: {path}"})

    return app


def _reply(start_response: StartResponse, code: int, body: object) -> list[bytes]:
    data = json.dumps(body, indent=2).encode() + b"\n"
    start_response(
        _STATUS[code],
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood the daemon's log."""


class OpsServer:
    """Serves :func:`ops_app` on ``host:port`` (port 0: any free port) until closed."""

    def __init__(self, host: str, port: int, app: WSGIApplication) -> None:
        server_class = _Server6 if ":" in host else _Server
        self._server = make_server(
            host, port, app, server_class=server_class, handler_class=_QuietHandler
        )
        self.host = host
        self.port: int = self._server.server_port
        self._thread = spawn("ops-http", self._server.serve_forever, 0.2, start=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> OpsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


__all__ = ["OpsServer", "ops_app"]
