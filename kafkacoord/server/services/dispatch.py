"""From frames to shards: decode each request and hand it to the shard that owns it.

Runs on the listener's loop thread, so it only decodes and enqueues. A request the
daemon cannot read (unknown API or version, a body that does not parse) is answered
with an error and its connection closed, as a Kafka broker does. Mutating admin calls
are checked against ``admin_principals`` when the listener authenticates clients.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import structlog

from kafkacoord.coordinator.protocol import (
    APIS_BY_KEY,
    CONTROLLER_APIS,
    ErrorCode,
    ProtocolError,
    decode_request,
)
from kafkacoord.coordinator.protocol.apis import encode_body
from kafkacoord.coordinator.protocol.base import PUSH_CORRELATION_ID
from kafkacoord.coordinator.runtime.shard import Reply, Request, RequestRef
from kafkacoord.wire import RequestHeader, ServerConnection
from kafkacoord.wire.frames import encode_response

log = structlog.get_logger(__name__)

ControllerTarget = Callable[[Request], None]
# Every group request of one read, as (shard, request): handed over in one go.
GroupTarget = Callable[[list[tuple[int, Request]]], None]


class ConnectionChannel:
    """A connection as the runtime sees it: where a request's replies go."""

    __slots__ = ("_conn",)

    def __init__(self, conn: ServerConnection) -> None:
        self._conn = conn

    def deliver(self, replies: Sequence[Reply]) -> None:
        frames = [
            encode_response(
                r.to.correlation_id,
                int(r.error),
                r.message,
                _encoded(r),
            )
            for r in replies
        ]
        # Pushes answer no request: they must not count against the in-flight limit.
        answered = sum(1 for r in replies if r.to.correlation_id != PUSH_CORRELATION_ID)
        self._conn.send(frames[0] if len(frames) == 1 else b"".join(frames), answered)


def _encoded(reply: Reply) -> bytes:
    if reply.encoded is not None:
        return reply.encoded
    return b"" if reply.body is None else encode_body(reply.body)


def channel_of(conn: ServerConnection) -> ConnectionChannel:
    channel = conn.attachment
    if channel is None:
        channel = conn.attachment = ConnectionChannel(conn)
    assert isinstance(channel, ConnectionChannel)
    return channel


@dataclass(slots=True)
class DispatchStats:
    # Errors answered here, before any shard saw the request.
    rejected: dict[str, int] = field(default_factory=dict)

    def count(self, code: ErrorCode) -> None:
        self.rejected[code.name] = self.rejected.get(code.name, 0) + 1


class RequestDispatcher:
    """Routes each decoded request to the controller or to the group shard it names, and
    answers what no shard may see (unknown APIs, unauthorized admin calls) itself."""

    def __init__(
        self,
        controller: ControllerTarget,
        groups: GroupTarget,
        *,
        admin_principals: Collection[str] | None = None,
    ) -> None:
        self._controller = controller
        self._groups = groups
        # None: no client authentication, so no principal to check.
        self._admins = None if admin_principals is None else _principal_set(admin_principals)
        self.stats = DispatchStats()

    def __call__(self, frames: list[tuple[RequestHeader, bytes]], conn: ServerConnection) -> None:
        groups: list[tuple[int, Request]] = []
        try:
            for header, body in frames:
                if conn.closed:
                    break  # a bad frame closed it: what follows it is not served
                try:
                    self._one(header, body, conn, groups)
                except Exception as exc:  # a bug here must not cost the other frames
                    log.exception("dispatch failed", api_key=header.api_key)
                    self._refuse(conn, header, ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"{type(exc).__name__}: {exc}", close=False)  # fmt: skip
        finally:
            if groups:
                self._groups(groups)

    def _one(
        self, header: RequestHeader, body: bytes, conn: ServerConnection,
        groups: list[tuple[int, Request]],
    ) -> None:  # fmt: skip
        spec = APIS_BY_KEY.get(header.api_key)
        if spec is None:
            self._refuse(conn, header, ErrorCode.INVALID_REQUEST,
                         f"unknown api key {header.api_key}", close=True)  # fmt: skip
            return
        if not 0 <= header.api_version <= spec.max_version:
            self._refuse(conn, header, ErrorCode.UNSUPPORTED_VERSION,
                         f"{spec.name} v{header.api_version} is not supported "
                         f"(0..{spec.max_version})", close=True)  # fmt: skip
            return
        try:
            parsed = decode_request(spec, body)
        except ProtocolError as exc:
            self._refuse(conn, header, exc.code, exc.message or "malformed body", close=True)
            return
        if spec.admin and self._admins is not None and not _allowed(conn.principal, self._admins):
            log.warning("admin call refused", api=spec.name, principal=conn.principal,
                        peer=conn.peer)  # fmt: skip
            self._refuse(conn, header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         f"principal {conn.principal!r} may not call {spec.name}; "
                         "it is not in admin_principals", close=False)  # fmt: skip
            return
        request = Request(
            RequestRef(header.client_id, header.correlation_id, channel_of(conn)), spec.name, parsed
        )
        if spec.name in CONTROLLER_APIS:
            self._controller(request)
        else:
            groups.append((header.shard, request))

    def _refuse(
        self, conn: ServerConnection, header: RequestHeader, code: ErrorCode, message: str,
        *, close: bool,
    ) -> None:  # fmt: skip
        self.stats.count(code)
        if close:
            log.info("bad request; closing connection", peer=conn.peer, client=header.client_id,
                     api_key=header.api_key, error=code.name, reason=message)  # fmt: skip
        conn.reject(header, int(code), message, close=close)


def reject(request: Request, code: ErrorCode, message: str | None = None) -> None:
    """Answer a request at once with an error (no shard can take it here)."""
    channel = request.ref.channel
    if channel is not None:
        channel.deliver([Reply(request.ref, request.api, code, None, message)])


def _principal_set(names: Collection[str]) -> frozenset[str]:
    # Kafka writes principals as "User:CN=…"; the bare subject means the same here.
    return frozenset(n.removeprefix("User:") for n in names)


def _allowed(principal: str | None, admins: frozenset[str]) -> bool:
    return principal is not None and principal in admins
