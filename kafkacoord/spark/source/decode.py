"""Decode raw records into the typed columns of the source.

Well-formed records in the newest schema version (nearly all of them) are read
straight with fastavro; anything else (older versions, garbage) goes through
``kafkacoord.codecs``, which resolves old versions or raises the canonical
:class:`CodecError`. A unit test checks both paths agree with the codecs.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any, Final, cast

import fastavro

from kafkacoord.codecs import SPECS, CodecError, RecordType, decode_key, decode_value
from kafkacoord.codecs.records import record_type_of

_KEY_CACHE_LIMIT: Final = 200_000


@dataclass(frozen=True, slots=True)
class _Current:
    key_version: int
    key_schema: Any
    value_version: int
    value_schema: Any


def _currents() -> dict[int, _Current]:
    found: dict[int, _Current] = {}
    for rtype, spec in SPECS.items():
        keys, values = spec.key_versions, spec.value_versions
        found[int(rtype)] = _Current(max(keys), keys[max(keys)], max(values), values[max(values)])
    return found


_CURRENT: Final = _currents()


class PoisonError(Exception):
    """A record that must be skipped; ``reason`` says why (the codec's message)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read(data: bytes, schema: Any) -> dict[str, Any] | None:
    """The Avro body after a 2-byte header, or None if it is not exactly one datum."""
    buf = BytesIO(data)
    buf.seek(2)
    try:
        datum = cast("dict[str, Any]", fastavro.schemaless_reader(buf, schema, None))
    except Exception:  # fastavro raises many types on garbage; the slow path names it
        return None
    return datum if buf.tell() == len(data) else None


class RecordDecoder:
    """Decodes keys (remembered: keys repeat) and values of the allowed record types."""

    def __init__(self, allowed: frozenset[RecordType]) -> None:
        self._allowed = allowed
        self._keys: dict[bytes, tuple[RecordType, dict[str, Any]] | str] = {}

    def key(self, raw: bytes | None) -> tuple[RecordType, dict[str, Any]]:
        if raw is None:
            raise PoisonError("record has no key")
        known = self._keys.get(raw)
        if known is None:
            known = self._decode_key(raw)
            if len(self._keys) >= _KEY_CACHE_LIMIT:
                self._keys.clear()
            self._keys[raw] = known
        if isinstance(known, str):
            raise PoisonError(known)
        return known

    def _decode_key(self, raw: bytes) -> tuple[RecordType, dict[str, Any]] | str:
        try:
            rtype = record_type_of(raw)
            current = _CURRENT[int(rtype)]
            datum = None
            if len(raw) >= 2 and raw[1] == current.key_version:
                datum = _read(raw, current.key_schema)
            if datum is None:
                datum = decode_key(raw).to_avro()
        except CodecError as exc:
            return str(exc)
        if rtype not in self._allowed:
            return f"record type {rtype.name} does not belong in this topic"
        return rtype, datum

    def value(self, rtype: RecordType, raw: bytes) -> dict[str, Any]:
        current = _CURRENT[int(rtype)]
        if len(raw) >= 2 and int.from_bytes(raw[:2], "big") == current.value_version:
            datum = _read(raw, current.value_schema)
            if datum is not None:
                return datum
        try:
            return decode_value(rtype, raw).to_avro()
        except CodecError as exc:
            raise PoisonError(str(exc)) from exc
