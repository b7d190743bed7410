"""What a failed call raises: the server's error code, or a timeout naming where it waited."""

from __future__ import annotations

from typing import TypeVar

from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol.binary import decode_reply_body

B = TypeVar("B", bound=Body)


class RequestError(Exception):
    """The server answered with an error (or never answered in time)."""

    def __init__(
        self, api: str, code: ErrorCode, message: str | None = None, body: bytes = b"",
        *, version: int = 0,
    ) -> None:  # fmt: skip
        detail = f": {message}" if message else ""
        super().__init__(f"{api} failed with {code.name}{detail}")
        self.api = api
        self.code = code
        self.message = message
        # Some errors carry a body too (JoinGroup's MEMBER_ID_REQUIRED names the member id).
        self.body = body
        self.version = version  # the api version the request was sent at

    def response(self, response_type: type[B]) -> B | None:
        if not self.body:
            return None
        return decode_reply_body(self.version, response_type, self.body)


class RequestTimeoutError(RequestError):
    def __init__(self, api: str, waited_s: float, where: str) -> None:
        super().__init__(
            api, ErrorCode.REQUEST_TIMED_OUT, f"no answer within {waited_s:.1f}s from {where}"
        )
        self.where = where
