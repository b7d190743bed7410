"""Calls to daemons: route, send on a shared connection, retry what is retriable.

One :class:`CoordinatorClient` per process and cluster, shared by every group
member, admin, node agent and CLI call in it (:func:`shared_client`), with one
connection per daemon. Every attempt of a call reuses its correlation id, so a
daemon that already answered it replays that answer instead of acting twice.

- NOT_COORDINATOR / NOT_CONTROLLER: wait for the routes to move on, then resend.
- COORDINATOR_LOAD_IN_PROGRESS and other retriable errors: back off, resend.
- A lost connection: reconnect and resend, within the call's timeout.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import structlog
from pydantic import ValidationError

from kafkacoord.coordinator.protocol import ALL_APIS, ApiSpec, Body, ErrorCode
from kafkacoord.coordinator.protocol.binary import decode_reply_body, encode_request_body
from kafkacoord.coordinator.protocol.group_api import ConsumerGroupHint
from kafkacoord.storage.kafka_config import client_config_of
from kafkacoord.storage.topics import InternalTopics
from kafkacoord.wire import (
    ClientTls,
    Connection,
    ConnectionLostError,
    RequestHeader,
    ResponseFrame,
)

from .errors import B, RequestError, RequestTimeoutError
from .routes import CONTROLLER, Routes, RouteTable, describe

log = structlog.get_logger(__name__)

_REROUTE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_CONTROLLER})
# Start correlation ids at a random point: a restarted process never matches old replies.
_CORRELATION_IDS = itertools.count(random.randrange(1 << 30))


# A caller acting for someone else (the console for its logged-in user) names them in the
# client id of the requests it sends from this thread, so the daemons' logs do too.
_ACTING_AS: ContextVar[str | None] = ContextVar("kafkacoord_acting_as", default=None)


@contextmanager
def acting_as(client_id: str) -> Iterator[None]:
    """Requests sent from this context carry ``client_id`` instead of the client's own."""
    token = _ACTING_AS.set(client_id)
    try:
        yield
    finally:
        _ACTING_AS.reset(token)


def _next_correlation_id() -> int:
    return next(_CORRELATION_IDS) & 0x7FFFFFFF


def error_of(frame: ResponseFrame) -> ErrorCode:
    try:
        return ErrorCode(frame.error_code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class CoordinatorClient:
    """Thread-safe; use :func:`shared_client` rather than building one per caller."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic_prefix: str = "__kc_",
        tls: ClientTls | None = None,
        client_id: str | None = None,
        attempt_timeout_s: float = 5.0,
        connect_timeout_s: float = 5.0,
        routes: Routes | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id or f"kc-{uuid.uuid4().hex[:12]}"
        self.topics = InternalTopics(prefix=topic_prefix)
        self.routes: Routes = routes or RouteTable(bootstrap, self.topics)
        self._tls = tls
        self._ssl = None if tls is None else tls.context()
        self._attempt_timeout_s = attempt_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._users = 1
        self._key: tuple[Any, ...] | None = None
        self.closed = False
        # (group, member) -> what to call when the daemon hints that member.
        self._hint_watchers: dict[tuple[str, str], Callable[[], None]] = {}
        # (endpoint, api) -> the highest api version it took: a daemon that predates a
        # version refuses it (UNSUPPORTED_VERSION), and is then sent the one before.
        self._versions: dict[tuple[str, str], int] = {}

    # -- connections ---------------------------------------------------------------------

    def connection(self, endpoint: str) -> Connection:
        with self._lock:
            conn = self._connections.get(endpoint)
            if conn is not None and not conn.closed:
                return conn
            connecting = self._connecting.setdefault(endpoint, threading.Lock())
        # One connect per daemon at a time, outside the main lock: a slow daemon must not
        # hold up calls to the others, and concurrent callers share what it opens.
        with connecting:
            with self._lock:
                conn = self._connections.get(endpoint)
                if conn is not None and not conn.closed:
                    return conn
            fresh = Connection(
                endpoint, ssl_context=self._ssl, connect_timeout_s=self._connect_timeout_s,
                on_push=self._pushed,
            )  # fmt: skip
            with self._lock:
                self._connections[endpoint] = fresh
            return fresh

    # -- pushes ----------------------------------------------------------------------------

    def watch_hints(self, group_id: str, member_id: str, wake: Callable[[], None]) -> None:
        """Call ``wake`` when a daemon hints this consumer group member (KIP-848 push)."""
        with self._lock:
            self._hint_watchers[(group_id, member_id)] = wake

    def unwatch_hints(self, group_id: str, member_id: str) -> None:
        with self._lock:
            self._hint_watchers.pop((group_id, member_id), None)

    def _pushed(self, frame: ResponseFrame) -> None:
        try:
            hint = ConsumerGroupHint.model_validate_json(frame.body)
        except ValidationError:
            log.warning("unreadable push from a daemon", size=len(frame.body))
            return
        with self._lock:
            wake = self._hint_watchers.get((hint.group_id, hint.member_id))
        if wake is not None:
            wake()

    def _resolve(self, target: int, deadline: float) -> str | None:
        if not self.routes.wait_ready(max(0.0, deadline - time.monotonic())):
            return None
        return self.routes.endpoint(target)

    # -- calls ---------------------------------------------------------------------------

    def send(self, target: int, body: Body, *, correlation_id: int | None = None,
             endpoint: str | None = None) -> tuple[str, Future[ResponseFrame]]:  # fmt: skip
        """One attempt, no retries: the endpoint tried and the future of its response.

        Raises :class:`ConnectionLostError` when no connection could be had.
        """
        api = type(body).__name__
        where = endpoint or self.routes.endpoint(target)
        if where is None:
            raise ConnectionLostError(f"no daemon known for {describe(target)}")
        spec = ALL_APIS[api]
        version = self.version_for(where, spec)
        header = RequestHeader(
            spec.key, version,
            _next_correlation_id() if correlation_id is None else correlation_id,
            max(target, -1), _ACTING_AS.get() or self.client_id,
        )  # fmt: skip
        return where, self.connection(where).send(header, encode_request_body(version, body))

    def version_for(self, endpoint: str, spec: ApiSpec) -> int:
        """The api version to send ``endpoint``: the newest, unless it refused that."""
        return self._versions.get((endpoint, spec.name), spec.max_version)

    def _refused_version(self, endpoint: str, spec: ApiSpec, version: int) -> bool:
        """``endpoint`` refused ``version``: whether there is an older one to send it."""
        if version == 0:
            return False
        self._versions[(endpoint, spec.name)] = version - 1
        log.info("daemon predates an api version; sending the one before",
                 endpoint=endpoint, api=spec.name, refused=version)  # fmt: skip
        return True

    def call(
        self,
        target: int,
        body: Body,
        response: type[B],
        *,
        timeout_s: float = 30.0,
        attempt_timeout_s: float | None = None,
    ) -> B:
        """Send until answered or ``timeout_s`` passes; retriable errors back off and resend."""
        api = type(body).__name__
        spec = ALL_APIS[api]
        payloads: dict[int, bytes] = {}  # by api version, encoded once
        attempt_timeout = attempt_timeout_s or self._attempt_timeout_s
        deadline = time.monotonic() + timeout_s
        client_id = _ACTING_AS.get() or self.client_id
        correlation_id = _next_correlation_id()
        backoff = 0.02
        last: RequestError | None = None
        tried = describe(target)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last or RequestTimeoutError(api, timeout_s, tried)
            if self.closed:  # its process is stopping: retrying would only hold it up
                raise RequestError(api, ErrorCode.REQUEST_TIMED_OUT, "the client was closed")
            seen = self.routes.version
            endpoint = self._resolve(target, deadline)
            if endpoint is None:
                code = (
                    ErrorCode.NOT_CONTROLLER if target == CONTROLLER else ErrorCode.NOT_COORDINATOR
                )
                last = RequestError(api, code, f"no daemon known for {tried} (is a daemon up?)")
                self.routes.wait_change(seen, min(backoff, remaining))
                backoff = min(backoff * 2, 1.0)
                continue
            tried = endpoint
            version = self.version_for(endpoint, spec)
            payload = payloads.get(version)
            if payload is None:
                payload = payloads[version] = encode_request_body(version, body)
            header = RequestHeader(spec.key, version, correlation_id, max(target, -1), client_id)
            try:
                conn = self.connection(endpoint)
                future = conn.send(header, payload)
            except ConnectionLostError as exc:
                last = RequestError(api, ErrorCode.REQUEST_TIMED_OUT, str(exc))
                backoff = self._pause(backoff, deadline)
                continue
            try:
                frame = future.result(timeout=min(attempt_timeout, remaining))
            except FutureTimeout:
                conn.abandon(header.correlation_id)
                last = RequestTimeoutError(api, timeout_s, endpoint)
                continue
            except ConnectionLostError as exc:
                last = RequestError(api, ErrorCode.REQUEST_TIMED_OUT, str(exc))
                backoff = self._pause(backoff, deadline)
                continue
            code = error_of(frame)
            if code is ErrorCode.NONE:
                return decode_reply_body(version, response, frame.body)
            last = RequestError(api, code, frame.message, frame.body, version=version)
            if code is ErrorCode.UNSUPPORTED_VERSION and self._refused_version(
                endpoint, spec, version
            ):
                continue  # refused at the daemon's edge, so never run: sent again as it was
            if not code.retriable:
                raise last
            if code in _REROUTE:
                # The metadata names the new owner soon: wake as soon as it does.
                self.routes.wait_change(seen, min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 1.0)
            else:
                backoff = self._pause(backoff, deadline)

    @staticmethod
    def _pause(backoff: float, deadline: float) -> float:
        time.sleep(min(backoff * random.uniform(0.5, 1.0), max(deadline - time.monotonic(), 0)))
        return min(backoff * 2, 1.0)

    # -- sharing and closing ----------------------------------------------------------------

    def close(self) -> None:
        """Release this user's hold; the last user closes the connections and the routes."""
        if self._key is not None and not _release(self):
            return
        with self._lock:
            if self.closed:
                return
            self.closed = True
            connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            conn.close()
        self.routes.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: dict[tuple[Any, ...], CoordinatorClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(
    bootstrap: str, *, topic_prefix: str = "__kc_", tls: ClientTls | None = None
) -> CoordinatorClient:
    """The process's client for this cluster; every ``close()`` releases one hold."""
    key = (bootstrap, client_config_of(bootstrap), topic_prefix, tls)
    with _SHARED_LOCK:
        client = _SHARED.get(key)
        if client is not None and not client.closed:
            client._users += 1
            return client
        client = CoordinatorClient(bootstrap, topic_prefix=topic_prefix, tls=tls)
        client._key = key
        _SHARED[key] = client
        return client


def _release(client: CoordinatorClient) -> bool:
    """Drop one hold; True when it was the last and the client should really close."""
    with _SHARED_LOCK:
        client._users -= 1
        if client._users > 0:
            return False
        if _SHARED.get(client._key or ()) is client:
            del _SHARED[client._key or ()]
        return True
