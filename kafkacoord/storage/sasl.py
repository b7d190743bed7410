"""SASL authentication for connections kafkacoord opens itself (the batch producer).

Kafka's exchange (KIP-152): SaslHandshake v1 names the mechanism, then SaslAuthenticate
v1 requests carry the mechanism's messages until it is done. PLAIN is one message;
SCRAM-SHA-256/512 is two rounds, computed by ``scramp``, which also checks the broker's
final signature, so a broker that does not know the password is refused too.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import Final

from scramp import ScramClient, ScramException

from .kafka_config import SaslCredentials

__all__ = ["SASL_AUTHENTICATE", "SASL_HANDSHAKE", "SaslError", "authenticate"]

SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
_VERSION: Final = 1  # both APIs; non-flexible, every Kafka since 1.0 serves it

# Sends one request body of the given API (version 1) and returns its response, after
# the correlation id.
Call = Callable[[int, bytes], Awaitable[bytes]]


class SaslError(Exception):
    """The broker refused the credentials, or the exchange broke off."""


async def authenticate(call: Call, credentials: SaslCredentials) -> None:
    """Run one SASL exchange over a fresh connection; raises :class:`SaslError`."""
    mechanism = credentials.mechanism
    response = await call(SASL_HANDSHAKE, _string(mechanism))
    error, offered = _handshake_response(response)
    if error:
        raise SaslError(f"mechanism {mechanism} not enabled on the broker (it offers "
                        f"{', '.join(offered) or 'none'}; error {error})")  # fmt: skip
    if mechanism == "PLAIN":
        message = f"\0{credentials.username}\0{credentials.password}".encode()
        await _step(call, message)
        return
    if not mechanism.startswith("SCRAM-"):
        raise SaslError(f"the batch producer does not speak SASL/{mechanism}")
    try:
        scram = ScramClient([mechanism], credentials.username, credentials.password)
        server_first = await _step(call, scram.get_client_first().encode())
        scram.set_server_first(server_first.decode())
        server_final = await _step(call, scram.get_client_final().encode())
        scram.set_server_final(server_final.decode())
    except (ScramException, UnicodeDecodeError) as exc:
        raise SaslError(f"SCRAM exchange failed: {exc}") from exc


async def _step(call: Call, message: bytes) -> bytes:
    error, text, answer = _authenticate_response(await call(SASL_AUTHENTICATE, _bytes(message)))
    if error:
        raise SaslError(text or f"authentication failed (error {error})")
    return answer


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _handshake_response(body: bytes) -> tuple[int, list[str]]:
    try:
        error, count = struct.unpack_from(">hi", body)
        position, offered = 6, []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", body, position)
            offered.append(body[position + 2 : position + 2 + length].decode())
            position += 2 + length
    except (struct.error, UnicodeDecodeError) as exc:
        raise SaslError(f"SaslHandshake response of {len(body)} bytes: {exc}") from exc
    return error, offered


def _authenticate_response(body: bytes) -> tuple[int, str | None, bytes]:
    try:
        error, length = struct.unpack_from(">hh", body)
        position = 4
        text = None
        if length >= 0:
            text = body[position : position + length].decode(errors="replace")
            position += length
        (size,) = struct.unpack_from(">i", body, position)
        position += 4
        answer = body[position : position + max(size, 0)]
    except struct.error as exc:
        raise SaslError(f"SaslAuthenticate response of {len(body)} bytes: {exc}") from exc
    return error, text, answer
