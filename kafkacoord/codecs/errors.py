"""Codec errors: one clear exception type for every way bytes can be wrong."""

from __future__ import annotations


class CodecError(ValueError):
    """Bytes that are not a valid kafkacoord record (truncated, unknown type, bad version)."""

    def __init__(self, message: str, *, part: str = "record", cause: BaseException | None = None):
        detail = f"{part}: {message}"
        if cause is not None:
            detail += f" ({type(cause).__name__}: {cause})"
        super().__init__(detail)
        self.part = part
