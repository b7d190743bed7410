"""From frames to shards: decode each request and hand it to the shard that owns it.

Runs on the listener's loop thread, so it only decodes and enqueues. A request the
daemon cannot read (unknown API or version, a body that is not JSON or not the API's
shape) is answered with an error and its connection closed, as a Kafka broker does. A
body of the right shape with a value beyond its bound (``protocol/types.py``) is
refused on its own, and so is a group request sent to a shard that does not own its
group (NOT_COORDINATOR): their connections serve on. When the listener authenticates
clients, admin writes and node calls are checked against the principals allowed them
(:mod:`.authorize`); a refusal is answered alone and its connection serves on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import structlog

from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import (
    APIS_BY_KEY,
    CONTROLLER_APIS,
    ErrorCode,
    RequestBodyError,
)
from kafkacoord.coordinator.protocol.apis import MESSAGE_MAX
from kafkacoord.coordinator.protocol.base import PUSH_CORRELATION_ID
from kafkacoord.coordinator.protocol.binary import RequestBody, decode_body, encode_reply_body
from kafkacoord.coordinator.protocol.group_api import named_groups
from kafkacoord.coordinator.runtime.shard import Reply, Request, RequestRef
from kafkacoord.wire import RequestHeader, ServedConnection
from kafkacoord.wire.frames import encode_response

from .authorize import Authorizer

log = structlog.get_logger(__name__)

ControllerTarget = Callable[[Request], None]
# Every group request of one read, as (shard, request): handed over in one go.
GroupTarget = Callable[[list[tuple[int, Request]]], None]


class ConnectionChannel:
    """A connection as the runtime sees it: where a request's replies go."""

    __slots__ = ("_conn",)

    def __init__(self, conn: ServedConnection) -> None:
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
    return b"" if reply.body is None else encode_reply_body(reply.to.api_version, reply.body)


def channel_of(conn: ServedConnection) -> ConnectionChannel:
    channel = conn.attachment
    if channel is None:
        channel = conn.attachment = ConnectionChannel(conn)
    assert isinstance(channel, ConnectionChannel)
    return channel


# Why a request was refused here (kafkacoord_requests_refused_total's ``reason``).
Reason = Literal[
    "malformed", "out_of_range", "wrong_shard", "unknown_api", "unsupported_version",
    "unauthorized", "dispatch_error",
]  # fmt: skip
UNKNOWN_API: Final = "unknown"
"""The ``api`` of a request whose key no API has: the key itself would be a label of
65,536 values."""
# Group ids whose shard is remembered: Java's hash of a 20-character id costs ~1.6 µs
# in Python, a dict hit ~0.1. Long ids are hashed each time rather than kept.
_OWNERS_KEPT: Final = 100_000
_OWNER_ID_CHARS: Final = 255


@dataclass(slots=True)
class DispatchStats:
    # Errors answered here, before any shard saw the request.
    rejected: dict[str, int] = field(default_factory=dict)
    # The same requests by (api, reason).
    refused: dict[tuple[str, str], int] = field(default_factory=dict)

    def count(self, code: ErrorCode, api: str = UNKNOWN_API,
              reason: Reason = "dispatch_error") -> None:  # fmt: skip
        self.rejected[code.name] = self.rejected.get(code.name, 0) + 1
        key = (api, reason)
        self.refused[key] = self.refused.get(key, 0) + 1


class RequestDispatcher:
    """Routes each decoded request to the controller or to the group shard it names, and
    answers what no shard may see (unknown APIs, bad bodies, unauthorized admin and node
    calls, groups of another shard) itself."""

    def __init__(
        self,
        controller: ControllerTarget,
        groups: GroupTarget,
        *,
        admin_principals: Collection[str] | None = None,
        node_principals: Mapping[str, Collection[int]] | None = None,
        offsets_partitions: int | None = None,
    ) -> None:
        self._controller = controller
        self._groups = groups
        # admin_principals None: no client authentication, so no principal to check (the
        # daemon serves so only on loopback or with allow_plaintext_admin).
        self._authorizer = (
            None if admin_principals is None else Authorizer(admin_principals, node_principals)
        )
        # None: shards are not checked against their groups.
        self._partitions = offsets_partitions
        self._owners: dict[str, int] = {}
        self.stats = DispatchStats()

    def __call__(self, frames: list[tuple[RequestHeader, bytes]], conn: ServedConnection) -> None:
        groups: list[tuple[int, Request]] = []
        try:
            for header, body in frames:
                if conn.closed:
                    break  # a bad frame closed it: what follows it is not served
                try:
                    self._one(header, body, conn, groups)
                except Exception as exc:  # a bug here must not cost the other frames
                    log.exception("dispatch failed", api_key=header.api_key)
                    spec = APIS_BY_KEY.get(header.api_key)
                    self._refuse(conn, header, ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"{type(exc).__name__}: {exc}"[:MESSAGE_MAX], close=False,
                                 api=UNKNOWN_API if spec is None else spec.name,
                                 reason="dispatch_error")  # fmt: skip
        finally:
            if groups:
                self._groups(groups)

    def _one(
        self, header: RequestHeader, body: bytes, conn: ServedConnection,
        groups: list[tuple[int, Request]],
    ) -> None:  # fmt: skip
        spec = APIS_BY_KEY.get(header.api_key)
        if spec is None:
            self._refuse(conn, header, ErrorCode.INVALID_REQUEST,
                         f"unknown api key {header.api_key}", close=True,
                         api=UNKNOWN_API, reason="unknown_api")  # fmt: skip
            return
        if not 0 <= header.api_version <= spec.max_version:
            self._refuse(conn, header, ErrorCode.UNSUPPORTED_VERSION,
                         f"{spec.name} v{header.api_version} is not supported "
                         f"(0..{spec.max_version})", close=True,
                         api=spec.name, reason="unsupported_version")  # fmt: skip
            return
        try:
            parsed = decode_body(spec, header.api_version, body)
        except RequestBodyError as exc:
            # Kafka closes only on what it cannot parse; a value out of range is refused
            # alone, before any shard (or its state) sees it.
            self._refuse(conn, header, exc.code, exc.message or "malformed body",
                         close=exc.malformed, api=spec.name,
                         reason="malformed" if exc.malformed else "out_of_range")  # fmt: skip
            return
        refusal = None if self._authorizer is None else self._authorizer.refusal(
            spec, parsed, conn.principal
        )  # fmt: skip
        if refusal is not None:
            log.warning("call refused", api=spec.name, principal=conn.principal,
                        peer=conn.peer, client=header.client_id, error=refusal.code.name,
                        reason=refusal.message)  # fmt: skip
            self._refuse(conn, header, refusal.code, refusal.message[:MESSAGE_MAX], close=False,
                         api=spec.name, reason="unauthorized")  # fmt: skip
            return
        if spec.admin:  # the audit trail: who changed the cluster, through which client
            log.info("admin call", api=spec.name, principal=conn.principal, peer=conn.peer,
                     client=header.client_id)  # fmt: skip
        is_controller = spec.name in CONTROLLER_APIS
        if not is_controller and self._partitions is not None:
            problem = self._shard_problem(header.shard, parsed, self._partitions)
            if problem is not None:
                self._refuse(conn, header, ErrorCode.NOT_COORDINATOR, problem, close=False,
                             api=spec.name, reason="wrong_shard")  # fmt: skip
                return
        request = Request(
            RequestRef(header.client_id, header.correlation_id, channel_of(conn),
                       principal=conn.principal, api_version=header.api_version),
            spec.name, parsed,
        )  # fmt: skip
        if is_controller:
            self._controller(request)
        else:
            groups.append((header.shard, request))

    def _shard_problem(self, shard: int, body: RequestBody, partitions: int) -> str | None:
        """Why ``shard`` may not serve ``body`` (a group request), or None: it must be a
        shard of the offsets topic and own every group the request names. A client whose
        partition count differs from the daemon's would otherwise split a group's state
        across shards."""
        if not 0 <= shard < partitions:
            return f"shard {shard} is not a partition of the offsets topic (0..{partitions - 1})"
        owners = self._owners
        one = getattr(body, "group_id", None)  # most requests name one group
        for group in named_groups(body) if one is None else (one,):
            owner = owners.get(group)
            if owner is None:
                owner = partition_for(group, partitions)
                if len(group) <= _OWNER_ID_CHARS:
                    if len(owners) >= _OWNERS_KEPT:
                        owners.clear()
                    owners[group] = owner
            if owner != shard:
                shown = (
                    repr(group)
                    if len(group) <= 64
                    else f"{group[:32]!r}... ({len(group)} characters)"
                )
                return f"group {shown} belongs to shard {owner}, not {shard}"
        return None

    def _refuse(
        self, conn: ServedConnection, header: RequestHeader, code: ErrorCode, message: str,
        *, close: bool, api: str, reason: Reason,
    ) -> None:  # fmt: skip
        self.stats.count(code, api, reason)
        # The answer is UTF-8: a lone surrogate (from an exception's text) must not fail it.
        message = message.encode("utf-8", "backslashreplace").decode()
        if close:
            log.info("bad request; closing connection", peer=conn.peer, client=header.client_id,
                     api_key=header.api_key, error=code.name, reason=message)  # fmt: skip
        conn.reject(header, int(code), message, close=close)


def reject(request: Request, code: ErrorCode, message: str | None = None) -> None:
    """Answer a request at once with an error (no shard can take it here)."""
    channel = request.ref.channel
    if channel is not None:
        channel.deliver([Reply(request.ref, request.api, code, None, message)])
