"""Conversion between frozen dataclasses and the dicts fastavro reads and writes."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self


class AvroModel:
    """Mixin for frozen dataclasses whose fields match an Avro record one to one.

    Flat models need nothing more. Models with nested records or arrays override
    ``from_avro`` to rebuild them.
    """

    _field_names: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        names = cls.__dict__.get("_field_names")
        if not names:
            names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            cls._field_names = names
        return names

    def to_avro(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in self.field_names()}

    @classmethod
    def from_avro(cls, data: dict[str, Any]) -> Self:
        return cls(**{name: data[name] for name in cls.field_names()})


def _plain(value: Any) -> Any:
    if isinstance(value, AvroModel):
        return value.to_avro()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
